"""The library's typed errors, and the single table that maps them to CLI exit codes.

Why a tree of our own: every *expected* failure (bad config, missing model, unreachable endpoint,
locked store, ...) must reach the user as one ``Error: ...`` line with a hint and a non-zero exit
code, never a traceback. Library code raises these; only ``memsearch.cli`` turns
them into output. Some classes also subclass the builtin the original memsearch raised
(``KeyError``, ``ValueError``, ``RuntimeError``, ``ImportError``) so Python callers that caught those
keep working. Every error class lives here (modules re-export the ones they raise, so older import
paths keep working), which is also what lets the memory service send an error by its class name
and the client raise the same class (``service.error_from_payload``).

The tree (builtins a class also derives from in parentheses; exit code when not 1)::

    MemSearchError
        BackupError
            BackupNotFoundError
            RestoreConflictError
            SecretNeededError
        BinaryFileError
        ChunkNotFoundError
        CommandInterruptedError [exit 130]
        ConfigError
            CodexAppError
                CodexNoAnswerError
            ConfigEnvVarError (KeyError)
            ConfigKeyError (KeyError)
            ConfigValueError (ValueError)
        ConfirmationNeededError
        ConsoleError
        EmptyQueryError (ValueError) [exit 2]
        EmbeddingError
            EmbeddingAPIError
            InvalidBatchSizeError (ValueError)
            MissingAPIKeyError
            MissingDependencyError (ImportError)
            ModelNotFoundError
            UnknownProviderError (ValueError)
        FileTooLargeError
        ForgetError
            ForgetConflictError
            ForgetTargetError (ValueError) [exit 2]
            NothingToForgetError
                WeakMatchError
        HookUsageError [exit 2]
        IndexingError
        InvalidArgumentError (ValueError) [exit 2]
        InvalidChunkHashError (ValueError)
        InvalidDateError (ValueError) [exit 2]
        InvalidExpandOptionError (ValueError)
        LLMError
            EmptySummaryError
            LLMAPIError
            MissingLLMKeyError
            UnknownLLMProviderError (ValueError)
        MaintenanceError
            MemoryCommandRefusedError (ValueError)
        MemoryFolderNotFoundError (FileNotFoundError)
        NativeSummarizationError [exit 2]
        NotARegularFileError
        PathNotFoundError (FileNotFoundError) [exit 2]
        PrivatePathError
        RerankerError
            MissingRerankerKeyError (ValueError)
            RerankerAPIError (RuntimeError)
                InvalidRerankAnswerError (ValueError)
        SecretsFoundError
        ServiceError
            ServicePeerError
            ServiceRequestError
            ServiceRunningError
            ServiceStopRefusedError
            ServiceTimeoutError
            ServiceUnavailableError
                ServiceBusyError
                ServiceGoneError
            UnsafeRunDirError
        SkillError
            GitCommandError
            GitNotFoundError
            SkillExistsError (FileExistsError)
            SkillInputError (ValueError)
                NoInstallTargetError [exit 2]
                SkillMetaError
            SkillNotFoundError (ValueError)
            SkillWriteError
        SourceFileNotFoundError (FileNotFoundError)
        SourceReadError
        StaleChunkError
        StoreError
            CollectionNotFoundError
            DimensionMismatchError (ValueError)
                OriginalModelMissingError
            MigrationError
            StoreConnectionError (RuntimeError)
                StoreLockedError
            StoreDamagedError
        TranscriptError
            OpenCodeSessionError (LookupError)
            SessionNotApplicableError (ValueError) [exit 2]
            TranscriptNotFoundError (FileNotFoundError)
            TranscriptReadError (OSError)
            TurnNotFoundError (LookupError)
        UnknownTranscriptFormatError [exit 3]
        WatcherError
"""

from __future__ import annotations


class MemSearchError(Exception):
    """Base of every expected memsearch failure.

    ``message`` says what went wrong; ``hint`` says what to do about it (may be empty).
    """

    exit_code: int = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def one_line(self) -> str:
        """The message and hint as a single line (newlines folded), as the CLI prints it. An error
        may quote what it was given or read (a query, a line of a file, a model's answer), and
        its line is shown, logged and handed to models: private spans and secrets are taken out
        (the built-in rules: an error may be about the configuration itself)."""
        from memsearch.detector import Detector

        text = self.message if not self.hint else f"{self.message.rstrip('.')}. Hint: {self.hint}"
        return " ".join(Detector().redact(text).text.split())


# --- configuration --------------------------------------------------------------------------


class ConfigError(MemSearchError):
    """A config file or value is invalid (malformed TOML, unknown key, wrong type)."""


class ConfigKeyError(ConfigError, KeyError):
    """An unknown config key or section (a ``KeyError`` for compatibility)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class ConfigValueError(ConfigError, ValueError):
    """A config value cannot be used (a ``ValueError`` for compatibility)."""


class ConfigEnvVarError(ConfigError, KeyError):
    """An ``env:VAR`` reference names an unset environment variable."""

    def __str__(self) -> str:
        return self.message


# --- embeddings -----------------------------------------------------------------------------


class EmbeddingError(MemSearchError):
    """Any failure to produce embeddings."""


class UnknownProviderError(EmbeddingError, ValueError):
    """The provider name is not in the registry; the message lists the valid ones."""


class MissingDependencyError(EmbeddingError, ImportError):
    """An optional extra is not installed; the hint is the one-line install command."""


class ModelNotFoundError(EmbeddingError):
    """Model files could not be located; the message names every place that was tried."""


class MissingAPIKeyError(EmbeddingError):
    """A provider needs an API key and none was configured."""


class EmbeddingAPIError(EmbeddingError):
    """The embedding endpoint failed: unreachable, refused, rejected the request or the key."""


# --- reranking ----------------------------------------------------------------------------


class RerankerError(MemSearchError):
    """Any failure of the reranking stage (the remote Jev reranker; see ``jev_reranker``)."""


class MissingRerankerKeyError(RerankerError, ValueError):
    """The remote reranker needs an API key (``TYPESAFE_API_KEY``) and none is set."""


class RerankerAPIError(RerankerError, RuntimeError):
    """The remote reranker failed: unreachable, too slow, an HTTP error, a rejected key."""


class InvalidRerankAnswerError(RerankerAPIError, ValueError):
    """The remote reranker answered, but not with exactly one score in [0, 1] per candidate."""


# --- store ----------------------------------------------------------------------------------


class StoreError(MemSearchError):
    """Any failure talking to Milvus (Lite or server)."""


class StoreConnectionError(StoreError, RuntimeError):
    """The store could not be opened or reached."""


class StoreLockedError(StoreConnectionError):
    """A Milvus Lite database is held by another process."""


class StoreDamagedError(StoreError):
    """A Milvus Lite database has files the engine cannot read back (truncated, overwritten).

    The index is rebuildable from the markdown files, so the hint is always the way back:
    ``memsearch reset --yes`` (which works on a damaged store) and re-indexing.
    """


class DimensionMismatchError(StoreError, ValueError):
    """The collection's vector dimension differs from the embedding model's."""


class OriginalModelMissingError(DimensionMismatchError):
    """An index the original memsearch built with its default model (bge-m3, 1024-d), opened with
    our default model, and that model is not in the local HuggingFace cache."""


class MigrationError(StoreError):
    """``memsearch migrate`` cannot copy, or its copy does not match the source (the source is
    never changed): the destination is the source, or holds other chunks."""


class CollectionNotFoundError(StoreError):
    """A read-only command met a collection that does not exist."""


# --- lookups and input ----------------------------------------------------------------------


class ChunkNotFoundError(MemSearchError):
    """``expand``: no chunk with that hash."""


class InvalidChunkHashError(MemSearchError, ValueError):
    """``expand``: the argument is not a hex chunk hash."""


class SourceFileNotFoundError(MemSearchError, FileNotFoundError):
    """``expand``: the chunk's markdown file is gone from disk."""


class CommandInterruptedError(MemSearchError):
    """The command was stopped part way (Ctrl-C); the message says what was kept. Exit 130, the
    shell's code for a command ended by SIGINT."""

    exit_code = 130


class ConfirmationNeededError(MemSearchError):
    """A command that asks before it destroys data got no yes (declined, or no input to ask on)."""


class ConsoleError(MemSearchError):
    """``memsearch ui`` cannot serve (its port is taken, no project memory to show)."""


class EmptyQueryError(MemSearchError, ValueError):
    """``search`` was given nothing to search for (every chunk would match equally: noise)."""

    exit_code = 2


class MemoryFolderNotFoundError(MemSearchError, FileNotFoundError):
    """``recent`` found no memory folder to read (none given, none in this project)."""


class InvalidArgumentError(MemSearchError, ValueError):
    """A memory operation was called with an argument it does not take, of the wrong type, or out
    of its range (``memsearch.engine.operations`` checks every call once, where it enters)."""

    exit_code = 2


class InvalidDateError(MemSearchError, ValueError):
    """A ``--since``/``--until`` value (or ``since``/``until`` argument) names no day."""

    exit_code = 2


class ForgetError(MemSearchError):
    """``forget`` could not remove what was asked (nothing was removed)."""


class ForgetConflictError(ForgetError):
    """``forget``: a file changed between showing what would go and removing it."""


class ForgetTargetError(ForgetError, ValueError):
    """``forget`` was told nothing to forget, or a selector it cannot use (wrong usage)."""

    exit_code = 2


class NothingToForgetError(ForgetError):
    """``forget``: no memory matches the request."""


class BackupError(MemSearchError):
    """A kept original (``forget --undo``, ``scan --restore``) could not be restored (nothing was)."""


class BackupNotFoundError(BackupError):
    """No backup has that id (or none is left to undo)."""


class RestoreConflictError(BackupError):
    """A file changed since its backup was made, so restoring it would lose the change."""


class SecretNeededError(BackupError):
    """The backup was kept without a value memsearch forgot: the restore needs the value again."""


class WeakMatchError(NothingToForgetError):
    """``forget --query``: no hit matches the query strongly enough to be removed on its word."""


class SecretsFoundError(MemSearchError):
    """``scan`` found secrets in memory files (it lists where, never the values)."""


class UnknownTranscriptFormatError(MemSearchError):
    """The transcript is in no format we know (exit 3, so callers can fall back)."""

    exit_code = 3


# --- the memory service -----------------------------------------------------------------------


class ServiceError(MemSearchError):
    """The memory service could not be started, reached, or answered with an error of unknown type."""


class ServiceRunningError(ServiceError):
    """``serve`` found another service already running for the same store."""


class ServiceStopRefusedError(ServiceError):
    """``memsearch service stop`` asked a service that a program runs for itself (a process holding
    a ``MemSearch``): only that program can release its store, by closing its ``MemSearch`` or
    exiting."""


class UnsafeRunDirError(ServiceError):
    """The service's run folder (or its socket or lock file) is not a private one of ours: a
    symlink, another user's, group/other-accessible, or the wrong kind of file. Another local user
    could otherwise replace the socket and read every query or inject results."""


class ServicePeerError(ServiceError):
    """The process on the other end of the service's socket runs as another user."""


class ServiceUnavailableError(ServiceError):
    """The service cannot be reached, or dropped the connection before answering."""


class ServiceGoneError(ServiceUnavailableError):
    """The store's owner went away (exited, idled out, was killed) before it answered. Every
    operation is idempotent, so ``memsearch.service.owner`` sends it again to the next owner."""


class ServiceBusyError(ServiceUnavailableError):
    """The service has as many open connections as it accepts; this one was refused."""


class ServiceTimeoutError(ServiceError):
    """The service accepted the connection but sent nothing within the deadline (stopped or hung)."""


class ServiceRequestError(ServiceError):
    """A request the service refuses: not our protocol, malformed, or beyond its limits."""


def exit_code_for(exc: BaseException) -> int:
    """The CLI exit code for an exception: the class's own code, else 1."""
    return getattr(exc, "exit_code", 1) if isinstance(exc, MemSearchError) else 1


# --- Expanding a chunk (``memsearch expand``) --------------------------------------------------------


class StaleChunkError(MemSearchError):
    """The chunk's lines are no longer in its source file (the file shrank since indexing)."""


class SourceReadError(MemSearchError):
    """The chunk's source file exists but cannot be read."""


class InvalidExpandOptionError(MemSearchError, ValueError):
    """An expand option has an impossible value (negative context)."""


# --- Agent hooks -------------------------------------------------------------------------------------


class CodexAppError(ConfigError):
    """``codex app-server`` could not be started or did not answer as expected."""


class CodexNoAnswerError(CodexAppError):
    """``codex app-server`` gave no answer in time: taken for stuck (asked again from a fresh one)."""


class HookUsageError(MemSearchError):
    """A shim asked for a platform or event that does not exist (a broken plugin install)."""

    exit_code = 2


# --- Compaction and LLMs -----------------------------------------------------------------------------


class NativeSummarizationError(MemSearchError):
    """The plugin is set to let its host agent summarise (exit 2 tells the hook to do that)."""

    exit_code = 2


class LLMError(MemSearchError):
    """Any failure to get text from an LLM."""


class UnknownLLMProviderError(LLMError, ValueError):
    """The provider type (or named provider) is unknown; the message lists what is valid."""


class MissingLLMKeyError(LLMError):
    """The vendor's endpoint needs an API key and none was configured."""


class LLMAPIError(LLMError):
    """The endpoint failed: unreachable, too slow, rejected the request or key, or answered nonsense."""


class EmptySummaryError(LLMError):
    """The LLM answered with no text, so there is nothing to write."""


# --- Maintenance tasks ------------------------------------------------------------------------------


class MaintenanceError(MemSearchError):
    """A maintenance task (PROJECT.md, USER.md, skill candidates) could not finish; recorded in the
    state file and retried on a later run."""


class MemoryCommandRefusedError(MaintenanceError, ValueError):
    """A model asked for a lookup outside the read commands on this project's memory."""


# --- Indexing, scanning and watching -----------------------------------------------------------------


class IndexingError(MemSearchError):
    """Files could not be indexed: ``index_file``'s file (the message names it and the reason), or
    some files of an ``index`` run that finished with the others (its report lists them)."""


class PathNotFoundError(MemSearchError, FileNotFoundError):
    """``index`` was given a path that does not exist (a typo such as ``./memroy``): refused before
    anything is indexed, by the library and so the CLI alike (exit 2, as a usage error)."""

    exit_code = 2


class WatcherError(MemSearchError):
    """The watcher could not be started (e.g. the system's limit on inotify watches is reached)."""


class BinaryFileError(MemSearchError):
    """A file with a markdown name holds binary data (a NUL byte near the start)."""


class FileTooLargeError(MemSearchError):
    """A markdown file is larger than ``MAX_MARKDOWN_BYTES``."""


class NotARegularFileError(MemSearchError):
    """The path is a FIFO, socket or device: reading it could block forever."""


class PrivatePathError(MemSearchError):
    """A folder memsearch keeps its data, caches or state in (``~/.memsearch``, a store) cannot
    be made private: it cannot be created, it is a file or a link, or another user owns it."""


# --- Transcripts (``memsearch transcript``) ----------------------------------------------------------


class TranscriptError(MemSearchError):
    """A transcript could not be shown (missing file, unknown turn or session)."""


class TranscriptNotFoundError(TranscriptError, FileNotFoundError):
    """The transcript path does not exist or is not a file."""


class TranscriptReadError(TranscriptError, OSError):
    """The transcript exists but cannot be read (permissions, I/O error, corrupt database)."""


class TurnNotFoundError(TranscriptError, LookupError):
    """``--turn`` matched no turn; showing everything instead would hide the mistake."""


class OpenCodeSessionError(TranscriptError, LookupError):
    """An OpenCode database needs ``--session`` (several sessions), or the session is not in it."""


class SessionNotApplicableError(TranscriptError, ValueError):
    """``--session`` was given for a JSONL transcript, which holds exactly one session."""

    exit_code = 2  # wrong usage, like Click's usage errors


# --- Embeddings --------------------------------------------------------------------------------------


class InvalidBatchSizeError(EmbeddingError, ValueError):
    """``batch_size`` is below 1 (a ``ValueError`` for compatibility)."""


# --- Skills from memory (``memsearch skills``, memsearch.skills) -------------------------------------


class SkillError(MemSearchError):
    """The skill candidate store or a skill install failed."""


class GitNotFoundError(SkillError):
    """``git`` is not on PATH; the candidate store is a git repository, so it cannot be written."""


class GitCommandError(SkillError):
    """A git command in the candidate store failed (its stderr is in the message)."""


class SkillExistsError(SkillError, FileExistsError):
    """An install would overwrite a SKILL.md that memsearch did not write (``--force`` replaces it)."""


class SkillInputError(SkillError, ValueError):
    """A skill's name, description or body is missing or too long (``ValueError`` as the original)."""


class SkillMetaError(SkillInputError):
    """A candidate's ``meta.json`` or its folder is not what memsearch writes (wrong types, an
    install path outside a skills folder, a symbolic link): the store may come from a cloned
    repository, so such a candidate is refused, never trusted."""


class NoInstallTargetError(SkillInputError):
    """``skills install`` was given no destination (a usage error, exit 2 as the original)."""

    exit_code = 2


class SkillNotFoundError(SkillError, ValueError):
    """No candidate by that name (``ValueError``: the original raised one)."""


class SkillWriteError(SkillError):
    """A file of the candidate store or of an install cannot be written (the OS error is named)."""
