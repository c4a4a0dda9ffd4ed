"""The engine's vocabulary: a platform adapter row, the normalised hook input, the per-run context,
a captured turn, and the reply a handler returns.

Adding a platform means writing one :class:`Platform` row (how to read the host's stdin, where the
project is, how to answer, how to extract the last turn, which native summariser to run, its
installer and any actions of its own) and listing it in ``memsearch.agent.hooks.platforms.ROWS``; the
event handlers are shared, and every other table about hosts is derived from the rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig, PluginPlatformConfig

__all__ = [
    "DISABLE_ENV",
    "MEMSEARCH_DIR_ENV",
    "NO_WATCH_ENV",
    "Capture",
    "HookContext",
    "HookInput",
    "Platform",
    "PlatformAction",
    "Reply",
    "disabled",
    "dumps",
    "find_git_root",
    "plugin_reply",
    "render_hook_json",
]

#: Set to 1 on every nested agent call: the hooks of that agent then do nothing (no re-entry).
DISABLE_ENV = "MEMSEARCH_DISABLE"
#: Set to 1 to keep the hooks from starting or stopping background processes.
NO_WATCH_ENV = "MEMSEARCH_NO_WATCH"
#: A shared memory folder replacing ``<project>/.memsearch`` (the collection follows it).
MEMSEARCH_DIR_ENV = "MEMSEARCH_DIR"


def disabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``MEMSEARCH_DISABLE=1`` asks every hook to do nothing.

    Here beside :data:`DISABLE_ENV` rather than in the engine, so that the engine's actions (the
    OpenCode daemon among them) can ask it without importing the engine back.
    """
    from memsearch.config.envvars import env_flag

    return env_flag(DISABLE_ENV, env)


@dataclass(frozen=True)
class HookInput:
    """What the host sent on stdin, reduced to the fields the handlers use.

    Claude Code and Codex use the same field names; a platform whose host names them differently
    maps them in its ``read_input``. ``raw`` keeps the whole object for platform-specific needs.
    """

    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    prompt: str = ""
    turn_id: str = ""
    last_assistant_message: str = ""
    source: str = ""
    stop_hook_active: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> HookInput:
        """The common snake_case field names (Claude Code, Codex); wrong types count as absent."""

        def text(name: str) -> str:
            value = data.get(name)
            return value if isinstance(value, str) else ""

        return cls(
            session_id=text("session_id"),
            transcript_path=text("transcript_path"),
            cwd=text("cwd"),
            prompt=text("prompt"),
            turn_id=text("turn_id"),
            last_assistant_message=text("last_assistant_message"),
            source=text("source"),
            stop_hook_active=data.get("stop_hook_active") is True,
            raw=dict(data),
        )


@dataclass
class Reply:
    """What a handler has to say: ``message`` for the user, ``context`` for the model."""

    message: str = ""
    context: str = ""


@dataclass(frozen=True)
class Capture:
    """One turn, extracted from the host's transcript and ready to summarise and journal.

    ``transcript`` is the rendered turn sent to a summariser; ``user_text`` and ``reply_text`` feed
    the plain extract used when no summariser answers. ``anchor`` and ``identity`` become the
    journal entry's anchor and duplicate key (see :class:`memsearch.engine.journal.JournalEntry`).
    """

    transcript: str
    user_text: str
    reply_text: str
    anchor: dict[str, str]
    identity: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capture:
        return cls(
            transcript=str(data.get("transcript", "")),
            user_text=str(data.get("user_text", "")),
            reply_text=str(data.get("reply_text", "")),
            anchor={str(k): str(v) for k, v in dict(data.get("anchor") or {}).items()},
            identity=tuple(str(x) for x in data.get("identity") or ()),
        )


#: A command of one host (``memsearch hook <platform> <action>``): row and options → text output.
PlatformAction = Callable[["Platform", Mapping[str, Any]], str]


#: Our events under the hook names of hosts that follow Claude Code's hooks API (Claude Code, Codex).
CLAUDE_STYLE_EVENTS: Mapping[str, str] = {
    "session-start": "SessionStart",
    "prompt-submit": "UserPromptSubmit",
    "stop": "Stop",
    "session-end": "SessionEnd",
}


@dataclass(frozen=True)
class Platform:
    """One host agent: everything the shared handlers need to know about it.

    - ``events`` maps our event names to the host's (``session-start`` → ``SessionStart``); an
      event missing here is not offered by the host.
    - ``read_input`` turns the host's stdin JSON into a :class:`HookInput`.
    - ``project_dir`` says which folder the session works in (before ``MEMSEARCH_DIR``).
    - ``render`` writes a :class:`Reply` in the host's stdout format for a host event name.
    - ``capture`` extracts the last turn (None: nothing to record).
    - ``native_summarizer`` runs the host's own CLI on a prompt and returns its text (None: it
      failed or is absent), with this process's hooks kept out of it.
    - ``keep_watch``: SessionStart starts a ``memsearch watch`` kept until SessionEnd (hosts that
      send SessionEnd); otherwise SessionStart runs a one-shot background index.
    - ``detach_capture``: Stop returns at once and a detached worker summarises and writes (hosts
      that run Stop synchronously, or exit right after it).
    - ``capture_in_worker``: with ``detach_capture``, the worker also reads the turn (hosts that
      write the turn into their transcript only after Stop returns); ``capture`` may then wait.
    - ``installer`` (``memsearch hook <platform> install --plugin-dir DIR``): for hosts that read
      hooks from the user's own configuration rather than loading the plugin folder; returns what
      it did. ``doctor`` (``... doctor``) says whether the host will run the installed hooks.
      None: the host has no such step.
    - ``actions``: commands only this host has (``memsearch hook opencode daemon``), beside the
      shared ones in ``memsearch.agent.hooks.engine.ACTIONS``; an action is never named like an event.
    """

    name: str
    agent_name: str
    events: Mapping[str, str]
    read_input: Callable[[Mapping[str, Any]], HookInput]
    project_dir: Callable[[HookInput, Mapping[str, str]], Path]
    render: Callable[[str, Reply], str]
    capture: Callable[[HookContext], Capture | None]
    native_summarizer: Callable[[HookContext, str], str | None] | None
    recall_hint: str
    title: bool = False
    keep_watch: bool = False
    detach_capture: bool = False
    capture_in_worker: bool = False
    #: The most characters of a rendered turn sent to a summariser (head and tail are kept).
    max_summary_chars: int = 100_000
    default_model: str = ""
    #: Seconds the native summariser may take.
    summarizer_timeout: float = 110.0
    installer: Callable[[Path], str] | None = None
    doctor: Callable[[], str] | None = None
    actions: Mapping[str, PlatformAction] = field(default_factory=dict)


def find_git_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a file in worktrees
    and submodules) — what ``git rev-parse --show-toplevel`` answers, without starting git."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


@dataclass
class HookContext:
    """Everything one hook run works with, computed once.

    ``memsearch_dir`` is ``MEMSEARCH_DIR`` when set, else ``<project>/.memsearch``; the collection
    is derived from whichever of the two was used. The configuration
    is resolved on first use only, so handlers that do not need it never read it.
    """

    platform: Platform
    event: str
    input: HookInput
    env: Mapping[str, str]
    now: dt.datetime
    project_dir: Path
    memsearch_dir: Path
    collection: str
    _config: MemSearchConfig | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls,
        platform: Platform,
        event: str,
        hook_input: HookInput,
        env: Mapping[str, str] | None = None,
        now: dt.datetime | None = None,
    ) -> HookContext:
        from memsearch.agent.hooks.collection import absolute_path, derive_collection

        env = os.environ if env is None else env
        project = platform.project_dir(hook_input, env)
        shared = env.get(MEMSEARCH_DIR_ENV, "").strip()
        memsearch_dir = Path(absolute_path(shared)) if shared else project / ".memsearch"
        collection = derive_collection(shared or project)
        return cls(
            platform, event, hook_input, env, now or dt.datetime.now(), project, memsearch_dir, collection
        )

    @property
    def memory_dir(self) -> Path:
        return self.memsearch_dir / "memory"

    @property
    def files_root(self) -> Path:
        """The folder this project's memory files must stay inside to be read
        (:mod:`memsearch.engine.project_files`): the project, or ``MEMSEARCH_DIR`` when that is elsewhere."""
        from memsearch.engine.project_files import files_root

        return files_root(self.project_dir, self.memsearch_dir)

    def flag(self, name: str) -> bool:
        """A yes/no ``MEMSEARCH_*`` variable of the hook's environment (read strictly)."""
        from memsearch.config.envvars import env_flag

        return env_flag(name, self.env)

    @property
    def config(self) -> MemSearchConfig:
        """The resolved config, with the derived collection (as the original passes --collection)."""
        if self._config is None:
            from memsearch.config import resolve_config

            self._config = resolve_config({"milvus": {"collection": self.collection}}, cwd=self.project_dir)
        return self._config

    @property
    def plugin(self) -> PluginPlatformConfig:
        return self.config.plugins.platform(self.platform.name)

    def description(self) -> str:
        """The collection description: ``<project folder> | <provider>/<model>``."""
        cfg = self.config
        return f"{self.project_dir.name or '.'} | {cfg.embedding.provider}/{cfg.embedding.model or 'default'}"

    def to_json(self) -> dict[str, Any]:
        """What a detached worker needs to rebuild this context (see :meth:`from_json`)."""
        return {
            "platform": self.platform.name,
            "event": self.event,
            "input": dict(self.input.raw),
            "now": self.now.isoformat(),
            "project_dir": str(self.project_dir),
            "memsearch_dir": str(self.memsearch_dir),
            "collection": self.collection,
        }

    @classmethod
    def from_json(
        cls, platform: Platform, data: Mapping[str, Any], env: Mapping[str, str] | None = None
    ) -> HookContext:
        return cls(
            platform,
            str(data.get("event", "stop")),
            platform.read_input(dict(data.get("input") or {})),
            os.environ if env is None else env,
            dt.datetime.fromisoformat(str(data["now"])),
            Path(str(data["project_dir"])),
            Path(str(data["memsearch_dir"])),
            str(data["collection"]),
        )


def dumps(data: Any) -> str:
    """Hook output JSON: one line, non-ASCII kept, real newlines escaped exactly once."""
    return json.dumps(data, ensure_ascii=False)


#: Host events whose JSON reply may carry ``hookSpecificOutput.additionalContext``.
CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})


def plugin_reply(key: str, events: frozenset[str] | None = None) -> Callable[[str, Reply], str]:
    """The reply format of hosts whose plugin module reads our JSON (OpenCode, OpenClaw, DSH): the
    model's text under ``key`` (only for the host ``events`` given, if any) and the status line as
    ``systemMessage`` for the module to log or drop; ``{}`` when there is nothing."""

    def render(host_event: str, reply: Reply) -> str:
        out: dict[str, str] = {}
        if reply.context and (events is None or host_event in events):
            out[key] = reply.context
        if reply.message:
            out["systemMessage"] = reply.message
        return dumps(out)

    return render


def render_hook_json(host_event: str, reply: Reply) -> str:
    """The reply as Claude Code and Codex read it: ``systemMessage`` (shown to the user) and
    ``hookSpecificOutput.additionalContext`` (given to the model); ``{}`` when there is nothing."""
    out: dict[str, Any] = {}
    if reply.message:
        out["systemMessage"] = reply.message
    if reply.context and host_event in CONTEXT_EVENTS:
        out["hookSpecificOutput"] = {"hookEventName": host_event, "additionalContext": reply.context}
    return dumps(out)
