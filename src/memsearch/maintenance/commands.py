"""The lookups a model may make: ``memsearch search|expand|transcript`` on this project's memory
only, every argument validated (:func:`validate_memory_command`), run without a shell with bounded
time and output (:func:`run_memory_command`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.journal import TRANSCRIPT_FIELDS
from memsearch.engine.project_files import MAX_JOURNAL_BYTES
from memsearch.errors import MemoryCommandRefusedError
from memsearch.maintenance.common import (
    MAX_COMMAND_CHARS,
    MAX_QUERY_CHARS,
    MAX_TOOL_CALLS,
    MAX_TOOL_OUTPUT,
    TOOL_TIMEOUT,
    read_text,
    root_of,
)

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig


# --- lookups offered to the model ---------------------------------------------------------------


@dataclass
class MemoryScope:
    """What a model's lookups may touch: this project's collection and the conversations its
    journals name (``transcript:``/``rollout:``/``db:`` anchors) that memsearch itself named there
    (:mod:`memsearch.engine.written`), and how many calls are left."""

    project_dir: Path
    collection: str
    transcripts: frozenset[str]
    calls_left: int = MAX_TOOL_CALLS

    @classmethod
    def of(cls, ctx: HookContext, input_dir: Path) -> MemoryScope:
        from memsearch.engine import written

        named = anchored_transcripts(input_dir, root_of(ctx, input_dir, folder=True))
        return cls(ctx.project_dir, ctx.collection, named & written.recorded_transcripts(ctx.memory_dir))


def anchored_transcripts(input_dir: Path, root: Path | None = None) -> frozenset[str]:
    """Resolved paths of the conversation files that the journals under ``input_dir`` name.

    An anchor in a journal proves nothing (a cloned repository's journal can name any file), so
    :meth:`MemoryScope.of` keeps only those memsearch recorded when it wrote the anchor."""
    from memsearch.engine.journal import parse_anchor_fields
    from memsearch.maintenance.state import journal_paths

    found: set[str] = set()
    for path in journal_paths(input_dir, root):
        for line in read_text(path, root or input_dir, max_bytes=MAX_JOURNAL_BYTES).splitlines():
            if "<!--" not in line:
                continue
            fields = parse_anchor_fields(line) or {}
            for name in TRANSCRIPT_FIELDS:
                value = fields.get(name, "")
                if value:
                    with contextlib.suppress(OSError, ValueError, RuntimeError):
                        found.add(str(Path(value).expanduser().resolve()))
    return frozenset(found)


_SHELL_CHARS = re.compile(r"[;&|<>`$\r\n\x00]")
_CHUNK_HASH = re.compile(r"[0-9a-fA-F]{8,64}")
_TURN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def _is_id(value: str) -> bool:
    return _TURN_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class _Option:
    """One option a read command accepts: its spellings, and how its value is checked."""

    names: tuple[str, ...]
    check: Callable[[str], bool] | None = None  # None: a flag without a value


def _int_in(low: int, high: int) -> Callable[[str], bool]:
    return lambda value: value.isdigit() and low <= int(value) <= high


@dataclass(frozen=True)
class _ReadCommand:
    """A memsearch read command: its options and how its one positional argument is checked."""

    options: tuple[_Option, ...]
    check_argument: Callable[[str, MemoryScope], str]  # the argument to pass, or raise
    #: Pass ``--collection <this project's>`` (commands that read the index).
    collection: bool


def _check_query(value: str, scope: MemoryScope) -> str:
    if not value.strip() or len(value) > MAX_QUERY_CHARS:
        raise MemoryCommandRefusedError(f"a search query must be 1 to {MAX_QUERY_CHARS} characters")
    return value


def _check_hash(value: str, scope: MemoryScope) -> str:
    if not _CHUNK_HASH.fullmatch(value):
        raise MemoryCommandRefusedError(f"{value!r} is not a chunk hash (8 to 64 hex digits)")
    return value


def _check_transcript(value: str, scope: MemoryScope) -> str:
    try:
        path = Path(value).expanduser()
        resolved = str((path if path.is_absolute() else scope.project_dir / path).resolve())
    except (OSError, ValueError, RuntimeError) as exc:
        raise MemoryCommandRefusedError(f"{value!r} is not a usable path ({exc})") from None
    if resolved not in scope.transcripts:
        raise MemoryCommandRefusedError(
            f"{value!r} is not a conversation named by this project's journals",
            hint="Use a path from a transcript:/rollout:/db: anchor in the journals.",
        )
    return resolved


_JSON_FLAG = _Option(("--json-output", "-j"))

#: The read commands a model may run, and exactly what each accepts.
READ_COMMANDS: dict[str, _ReadCommand] = {
    "search": _ReadCommand((_Option(("--top-k", "-k"), _int_in(1, 20)), _JSON_FLAG), _check_query, True),
    "expand": _ReadCommand(
        (
            _Option(("--section",)),
            _Option(("--no-section",)),
            _Option(("--lines", "-n"), _int_in(0, 200)),
            _JSON_FLAG,
        ),
        _check_hash,
        True,
    ),
    "transcript": _ReadCommand(
        (
            _Option(("--turn", "-t"), _is_id),
            _Option(("--context", "-c"), _int_in(0, 10)),
            _Option(("--session",), _is_id),
            _JSON_FLAG,
        ),
        _check_transcript,
        False,
    ),
}


def validate_memory_command(command: str, scope: MemoryScope) -> list[str]:
    """The memsearch arguments for a model's ``command``, or :class:`MemoryCommandRefusedError`.

    Accepted: ``[memsearch] search|expand|transcript`` with that command's own options and exactly
    one argument (a query, a chunk hash, a conversation the journals name). Refused: any other
    program or subcommand, shell syntax, unknown options (``--collection``, ``--milvus-uri``,
    config flags), paths outside the journals' anchors.
    """
    if len(command) > MAX_COMMAND_CHARS:
        raise MemoryCommandRefusedError(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    if _SHELL_CHARS.search(command):
        raise MemoryCommandRefusedError("shell syntax (; & | < > ` $ or a newline) is not allowed")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise MemoryCommandRefusedError(f"the command cannot be split into words ({exc})") from None
    if words[:1] == ["memsearch"]:
        words = words[1:]
    if not words or words[0] not in READ_COMMANDS:
        raise MemoryCommandRefusedError(
            f"only `memsearch {'|'.join(READ_COMMANDS)}` may run, not {(words or [''])[0]!r}"
        )
    name, rest = words[0], words[1:]
    spec = READ_COMMANDS[name]
    options = {spelling: option for option in spec.options for spelling in option.names}
    args: list[str] = [name]
    positional: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        index += 1
        if word == "--":
            positional += rest[index:]
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        spelling, has_value, value = word.partition("=")
        option = options.get(spelling)
        if option is None:
            raise MemoryCommandRefusedError(f"option {spelling!r} is not allowed for `memsearch {name}`")
        if option.check is None:
            if has_value:
                raise MemoryCommandRefusedError(f"option {spelling!r} takes no value")
            args.append(spelling)
            continue
        if not has_value:
            if index >= len(rest):
                raise MemoryCommandRefusedError(f"option {spelling!r} needs a value")
            value = rest[index]
            index += 1
        if not option.check(value):
            raise MemoryCommandRefusedError(f"{value!r} is not a valid value for {spelling!r}")
        args += [spelling, value]
    if len(positional) != 1:
        raise MemoryCommandRefusedError(
            f"`memsearch {name}` takes exactly one argument, got {len(positional)}"
        )
    argument = spec.check_argument(positional[0], scope)
    args += ["--", argument] if name == "search" else [argument]  # a query may start with "-"
    if spec.collection:
        args[1:1] = ["--collection", scope.collection]
    return args


def run_memory_command(command: str, scope: MemoryScope) -> str:
    """Run one lookup for the model and return its output (an ``Error: ...`` line when refused or
    failed; the model reads it and may try something else). Calls beyond the budget are refused."""
    from memsearch.agent.hooks.base import DISABLE_ENV, NO_WATCH_ENV
    from memsearch.agent.hooks.processes import memsearch_argv

    if scope.calls_left <= 0:
        return f"Error: the limit of {MAX_TOOL_CALLS} lookups is reached; answer with what you have."
    scope.calls_left -= 1
    try:
        args = validate_memory_command(command, scope)
    except MemoryCommandRefusedError as exc:
        return f"Error: refused: {exc.one_line()}"
    env = {**os.environ, NO_WATCH_ENV: "1", DISABLE_ENV: "1"}
    try:
        proc = subprocess.run(
            memsearch_argv(*args),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            cwd=scope.project_dir,
            env=env,
            timeout=TOOL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"Error: the command took longer than {TOOL_TIMEOUT:g} s."
    except OSError as exc:
        return f"Error: could not run memsearch ({exc.strerror or exc})."
    out = proc.stdout.decode("utf-8", errors="replace").strip()
    if proc.returncode != 0:
        out = (out + "\n" + proc.stderr.decode("utf-8", errors="replace")).strip()
    if len(out) > MAX_TOOL_OUTPUT:
        out = out[:MAX_TOOL_OUTPUT] + f"\n…[{len(out) - MAX_TOOL_OUTPUT} characters left out]"
    if proc.returncode == 0 and out:  # memory and conversations: data, framed as such
        from memsearch.agent.framing import frame

        return frame(out, f"memsearch {args[0]}")
    return out or "(no output)"


def command_of(arguments: Any) -> str:
    """The ``command`` argument of a tool call, whatever shape it came in."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return ""
    return str(arguments.get("command", "")) if isinstance(arguments, dict) else ""


TOOL_DESCRIPTION = (
    'Run one read-only memsearch command on this project\'s memory: `memsearch search "<query>"`, '
    "`memsearch expand <chunk_hash>` or `memsearch transcript <file> [--turn <id>]`."
)
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "The memsearch command line."}},
    "required": ["command"],
}
