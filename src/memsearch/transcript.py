"""Agent session transcripts → a list of turns: the L3 step of progressive disclosure.

This module owns reading the transcripts the agents write — Claude Code session JSONL, Codex
rollout JSONL, OpenClaw session JSONL or agent database, and OpenCode's SQLite database — into one small model
(:class:`Turn` with :class:`ToolCall` s), picking the turns around an id, and rendering them as text or
JSON for ``memsearch transcript``. The agent plugins reuse it (:func:`last_turn`) to extract the turn
they summarise, so the parsing lives once, here.

Formats are a table (:data:`FORMATS`: name → detector + parser). A format is recognised by the file's
magic bytes and tables (SQLite) or by the first JSONL entry that one of the entry detectors accepts, in table
order; nothing recognised raises :class:`~memsearch.errors.UnknownTranscriptFormatError` (exit 3, so a
caller can fall back to reading the file itself).

Transcripts are read by agents while the agent may still be writing them, and may hold bytes that are
not UTF-8. Each line is decoded on its own with replacement, a half-written final line is skipped, and
both are reported as warnings on the returned :class:`Transcript` instead of failing the whole read.

Compared with the original: Codex turns have stable ids, an unmatched ``--turn`` is an error rather
than "everything", consecutive Claude Code entries of one model response form one turn, meta and
sidechain entries are left out, images show as placeholders, and long renderings keep the turns that
were asked for (the newest ones, or the selected one) rather than the oldest.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import (
    OpenCodeSessionError,
    SessionNotApplicableError,
    TranscriptError,
    TranscriptNotFoundError,
    TranscriptReadError,
    TurnNotFoundError,
    UnknownTranscriptFormatError,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "FORMATS",
    "MAX_OUTPUT_CHARS",
    "MAX_RENDER_CHARS",
    "UNKNOWN_FORMAT_MESSAGE",
    "OpenCodeSessionError",
    "SessionNotApplicableError",
    "ToolCall",
    "Transcript",
    "TranscriptError",
    "TranscriptFormat",
    "TranscriptNotFoundError",
    "TranscriptReadError",
    "Turn",
    "TurnNotFoundError",
    "UnknownTranscriptFormat",
    "detect_format",
    "find_turn",
    "format_turns",
    "last_turn",
    "openclaw_message_turns",
    "parse_transcript",
    "read_transcript",
    "select_turns",
    "turns_to_json",
]

#: Each tool's output is clipped to this many characters (after stripping), as in the original.
MAX_OUTPUT_CHARS = 200
#: Budget for a whole text rendering; turns beyond it are left out (and the cut is marked).
MAX_RENDER_CHARS = 12000

UNKNOWN_FORMAT_MESSAGE = (
    "Unrecognized transcript format. Read the file directly to locate the relevant turns."
)

#: The original's exception name, kept for callers that import it.
UnknownTranscriptFormat = UnknownTranscriptFormatError

_SQLITE_MAGIC = b"SQLite format 3\x00"
_DETECT_ENTRIES = 80  # entries inspected for detection, as in the original
_TRUNCATED = " …[truncated]"


# --- errors ---------------------------------------------------------------------------------


# --- model ----------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """One tool invocation: its name, its input rendered as one string, and its clipped output."""

    name: str
    command: str
    output: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "command": self.command, "output": self.output}


@dataclass
class Turn:
    """One message of the conversation: a user prompt or one assistant response.

    ``uuid`` is the id ``--turn`` matches (the entry's own id; for Codex a stable derived id, see
    :func:`_parse_codex`). ``aliases`` holds the ids of further entries merged into this turn (Claude
    Code writes one entry per content block of a response), so an id copied from any of them works.
    """

    role: str
    uuid: str = ""
    text: str = ""
    tools: list[ToolCall] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The original's JSON shape: ``{role, uuid, text, tools: [{name, command, output}]}``."""
        return {
            "role": self.role,
            "uuid": self.uuid,
            "text": self.text,
            "tools": [t.to_dict() for t in self.tools],
        }

    def ids(self) -> list[str]:
        return [i for i in (self.uuid, *self.aliases) if i]


@dataclass
class Transcript:
    """What :func:`read_transcript` found: the format, the turns, and what was skipped on the way."""

    path: Path
    format: str | None  # None for an empty file
    turns: list[Turn]
    warnings: list[str] = field(default_factory=list)
    session: str | None = None  # the OpenCode session shown


# --- reading --------------------------------------------------------------------------------

Entry = tuple[int, dict[str, Any]]  # (1-based line number, parsed JSON object)


@dataclass
class _Source:
    """Everything a parser may need; parsers append to ``warnings``."""

    path: Path
    entries: list[Entry]
    session: str | None
    warnings: list[str]
    session_shown: str | None = None


def _check_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise TranscriptNotFoundError(
            f"transcript not found: {p}",
            "check the path; Claude Code keeps sessions in ~/.claude/projects/, Codex in "
            "~/.codex/sessions/, OpenCode in ~/.local/share/opencode/opencode.db",
        )
    if not p.is_file():
        raise TranscriptNotFoundError(f"not a transcript file: {p}", "pass the path of a session file")
    return p


def _read_head(p: Path) -> bytes:
    try:
        with p.open("rb") as f:
            return f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise TranscriptReadError(f"cannot read transcript {p}: {exc.strerror or exc}") from exc


def _read_jsonl(p: Path, warnings: list[str], limit: int | None = None) -> tuple[list[Entry], bool]:
    """Parse JSONL leniently: per-line UTF-8 with replacement, bad lines counted, a torn tail skipped.

    Returns the entries and whether the file had any non-blank line (an empty file is not an
    unknown format, just a session with nothing in it yet).
    """
    entries: list[Entry] = []
    bad_utf8: list[tuple[int, int]] = []  # (line, byte offset)
    malformed: list[int] = []
    torn_tail = 0
    nonblank = False
    offset = 0
    try:
        with p.open("rb") as f:
            for lineno, raw in enumerate(f, 1):
                start, offset = offset, offset + len(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    bad_utf8.append((lineno, start + exc.start))
                    text = raw.decode("utf-8", errors="replace")
                if lineno == 1:
                    text = text.lstrip("\ufeff")
                if not text.strip():
                    continue
                nonblank = True
                try:
                    obj = json.loads(text)
                except (ValueError, RecursionError):  # RecursionError: nested thousands deep
                    if not raw.endswith(b"\n"):
                        torn_tail = len(raw)  # the writer has not finished this line
                    else:
                        malformed.append(lineno)
                    continue
                if isinstance(obj, dict):
                    entries.append((lineno, obj))
                else:
                    malformed.append(lineno)
                if limit is not None and len(entries) >= limit:
                    break
    except OSError as exc:
        raise TranscriptReadError(f"cannot read transcript {p}: {exc.strerror or exc}") from exc
    if bad_utf8:
        line, byte = bad_utf8[0]
        more = f" (and {len(bad_utf8) - 1} more lines)" if len(bad_utf8) > 1 else ""
        warnings.append(
            f"{p}: invalid UTF-8 at byte offset {byte} (line {line}){more}; the bad bytes were replaced"
        )
    if malformed:
        what = "line that is not a JSON object" if len(malformed) == 1 else "lines that are not JSON objects"
        warnings.append(f"{p}: skipped {len(malformed)} {what} (first: line {malformed[0]})")
    if torn_tail:
        warnings.append(
            f"{p}: the last line is incomplete ({torn_tail} bytes, no newline; the session may still "
            "be writing it) and was skipped"
        )
    return entries, nonblank


def _unknown_format(p: Path, detail: str = "") -> UnknownTranscriptFormatError:
    *first, last = sorted(fmt.label for fmt in FORMATS.values())
    what = detail or f"{p} is none of them"
    return UnknownTranscriptFormatError(
        UNKNOWN_FORMAT_MESSAGE, f"memsearch reads {', '.join(first)} and {last}; {what}"
    )


def _sqlite_tables(p: Path) -> frozenset[str]:
    """The table names of a SQLite file (empty when it cannot be read): which SQLite format it is."""
    import sqlite3

    try:
        con = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return frozenset()
    try:
        return frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.Error:
        return frozenset()
    finally:
        con.close()


def _detect(
    head: bytes, entries: Sequence[Mapping[str, Any]], tables: frozenset[str] = frozenset()
) -> str | None:
    for name, fmt in FORMATS.items():
        if fmt.magic is not None and head.startswith(fmt.magic) and fmt.tables <= tables:
            return name
    for entry in entries[:_DETECT_ENTRIES]:
        for name, fmt in FORMATS.items():
            if fmt.entry_matches is not None and fmt.entry_matches(entry):
                return name
    return None


def _tables_if_sqlite(p: Path, head: bytes) -> frozenset[str]:
    return _sqlite_tables(p) if head.startswith(_SQLITE_MAGIC) else frozenset()


def detect_format(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]]) -> str:
    """The format name (a key of :data:`FORMATS`) of a transcript file, or of parsed JSONL entries.

    For a file, SQLite is told by its header bytes; JSONL by its first entries. Raises
    :class:`~memsearch.errors.UnknownTranscriptFormatError` when nothing matches.
    """
    if isinstance(source, (str, os.PathLike)):
        p = _check_path(source)
        head = _read_head(p)
        entries: list[Entry] = []
        if not any(fmt.magic is not None and head.startswith(fmt.magic) for fmt in FORMATS.values()):
            entries, _ = _read_jsonl(p, [], limit=_DETECT_ENTRIES)
        name = _detect(head, [e for _, e in entries], _tables_if_sqlite(p, head))
        if name is None:
            raise _unknown_format(p)
        return name
    name = _detect(b"", source)
    if name is None:
        raise UnknownTranscriptFormatError(UNKNOWN_FORMAT_MESSAGE, "the entries match no known format")
    return name


def read_transcript(path: str | os.PathLike[str], *, session: str | None = None) -> Transcript:
    """Read a transcript file into turns, with the warnings about anything skipped.

    ``session`` picks the session of an OpenCode or OpenClaw database (exact id or unique prefix);
    it may be left out when the database holds one session. It is an error for JSONL files.
    """
    p = _check_path(path)
    head = _read_head(p)
    warnings: list[str] = []
    entries: list[Entry] = []
    nonblank = True
    if not any(fmt.magic is not None and head.startswith(fmt.magic) for fmt in FORMATS.values()):
        entries, nonblank = _read_jsonl(p, warnings)
    name = _detect(head, [e for _, e in entries], _tables_if_sqlite(p, head))
    if name is None:
        if not nonblank:
            return Transcript(p, None, [], [f"{p} is empty"])
        raise _unknown_format(p)
    fmt = FORMATS[name]
    if session is not None and not fmt.has_sessions:
        raise SessionNotApplicableError(
            f"--session applies only to OpenCode and OpenClaw databases; {p} is a {fmt.label} transcript",
            "leave out --session (a JSONL transcript holds one session)",
        )
    src = _Source(p, entries, session, warnings)
    turns = fmt.parse(src)
    return Transcript(p, name, turns, warnings, src.session_shown)


def parse_transcript(path: str | os.PathLike[str], *, session: str | None = None) -> list[Turn]:
    """The turns of a transcript file (see :func:`read_transcript` for the warnings too)."""
    return read_transcript(path, session=session).turns


# --- shared rendering of content ------------------------------------------------------------

#: Input keys that say what a tool did, in order of preference (camelCase is OpenCode's).
_COMMAND_KEYS = ("command", "cmd", "query", "pattern", "file_path", "filePath", "path", "url")


def _render_input(value: Any) -> str:
    """A tool's input as one line of intent: the command, query or path if there is one, else JSON."""
    if isinstance(value, Mapping):
        for key in _COMMAND_KEYS:
            v = value.get(key)
            if v:
                return " ".join(str(x) for x in v) if isinstance(v, list) else str(v)
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return " ".join(str(x) for x in value)
    return "" if value is None else str(value)


def _clip(text: str) -> str:
    text = text.strip()
    return text[:MAX_OUTPUT_CHARS].rstrip() + _TRUNCATED if len(text) > MAX_OUTPUT_CHARS else text


def _image_placeholder(block: Mapping[str, Any]) -> str:
    source = block.get("source")
    media = source.get("media_type") if isinstance(source, Mapping) else None
    media = media or block.get("mimeType") or block.get("media_type")
    return f"[image: {media}]" if media else "[image]"


def _content_text(content: Any, *, images: bool = True) -> str:
    """Text of a message's content: a string as is; a list → its text blocks (and image placeholders)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif images and kind == "image":
                parts.append(_image_placeholder(block))
    return "\n".join(p for p in parts if p)


def _join(current: str, piece: str) -> str:
    piece = piece.rstrip()
    if not piece:
        return current
    return f"{current}\n{piece}" if current else piece


# --- Claude Code ----------------------------------------------------------------------------

# Context the harness injects into user messages; not what the user typed.
_INJECTED = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# A slash command the user typed, as Claude Code records it: ``<command-name>/exit</command-name>``
# with ``<command-message>`` and ``<command-args>``; a local command's output comes as its own user
# entry, ``<local-command-stdout>…`` (or ``-stderr``, or a ``-caveat`` note).
_COMMAND = re.compile(
    r"\s*<command-name>(?P<name>.*?)</command-name>\s*"
    r"(?:<command-message>.*?</command-message>\s*)?"
    r"(?:<command-args>(?P<args>.*?)</command-args>\s*)?$",
    re.DOTALL,
)
_LOCAL_OUTPUT = re.compile(r"\s*<local-command-(?:stdout|stderr|caveat)>", re.DOTALL)


def _is_claude_entry(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in ("user", "assistant") and "message" in entry


def _parse_claude(src: _Source) -> list[Turn]:
    """Claude Code session JSONL.

    User entries that carry ``tool_result`` blocks only deliver outputs to the pending tool calls;
    other user entries are prompts (``isMeta`` ones are harness notes and skipped). Claude Code writes
    each content block of one response as its own entry sharing ``message.id``: consecutive such
    entries form one assistant turn. Sidechain (sub-agent) entries are not part of the conversation.

    Slash commands are recorded as user entries too (Claude Code 2.1.197). A local one (``/exit``,
    ``/model``) never reaches the model: it and its ``<local-command-stdout>`` output are dropped.
    A command the model answers (a skill, a custom command) stays, as the line the user typed.
    """
    turns: list[Turn] = []
    commands: set[int] = set()  # ids of the user turns that are slash commands
    pending: dict[str, ToolCall] = {}
    current: Turn | None = None  # the open assistant turn
    current_msg_id: str | None = None
    for _, entry in src.entries:
        kind = entry.get("type")
        message = entry.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, Mapping):
            continue
        if entry.get("isSidechain"):
            continue
        content = message.get("content")
        uuid = str(entry.get("uuid") or "")
        if kind == "user":
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            if results:
                for result in results:
                    call = pending.get(str(result.get("tool_use_id")))
                    if call is not None:
                        out = _content_text(result.get("content"))
                        call.output = _clip(f"[error] {out}" if result.get("is_error") else out)
                continue
            if entry.get("isMeta"):
                continue
            text = _INJECTED.sub("", _content_text(content)).strip()
            if _LOCAL_OUTPUT.match(text):
                continue
            command = _COMMAND.match(text)
            if command:
                text = f"{command['name'].strip()} {(command['args'] or '').strip()}".strip()
            if text:
                turns.append(Turn("user", uuid, text))
                if command:
                    commands.add(id(turns[-1]))
                current, current_msg_id = None, None
            continue
        msg_id = message.get("id")
        if current is not None and msg_id and msg_id == current_msg_id:
            turn = current
            if uuid and uuid != turn.uuid:
                turn.aliases.append(uuid)
        else:
            turn = Turn("assistant", uuid)
            current, current_msg_id = turn, (str(msg_id) if msg_id else None)
            turns.append(turn)
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                turn.text = _join(turn.text, block)
            elif isinstance(block, Mapping):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    turn.text = _join(turn.text, block["text"])
                elif block.get("type") == "tool_use":
                    call = ToolCall(str(block.get("name") or "tool"), _render_input(block.get("input")))
                    turn.tools.append(call)
                    if block.get("id"):
                        pending[str(block["id"])] = call
    turns = [t for t in turns if t.text or t.tools]
    answered = {id(t) for t, after in itertools.pairwise(turns) if after.role == "assistant"}
    return [t for t in turns if id(t) not in commands or id(t) in answered]


# --- Codex ----------------------------------------------------------------------------------

_CODEX_TYPES = ("event_msg", "response_item", "session_meta", "turn_context")
#: Codex 0.171.0 prefixes ``exec_command`` outputs with ``Chunk ID: …`` … ``Output:`` lines.
_CODEX_EXEC_HEADER = re.compile(r"\AChunk ID: [^\n]*\n(?:[^\n]*\n)*?Output:\n")


def _is_codex_entry(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in _CODEX_TYPES and isinstance(entry.get("payload"), Mapping)


def _codex_output(raw: Any) -> str:
    """A tool output: Codex often stores ``{"output": ..., "metadata": ...}`` as a JSON string."""
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except ValueError:
            return _CODEX_EXEC_HEADER.sub("", raw, count=1)
        if isinstance(decoded, Mapping) and isinstance(output := decoded.get("output"), str):
            return output
        return raw
    if isinstance(raw, Mapping) and isinstance(content := raw.get("content"), str):
        return content
    return json.dumps(raw, ensure_ascii=False)


class _CodexState:
    """Turn assembly for a rollout; see :func:`_parse_codex` for the id scheme."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.pending: dict[str, ToolCall] = {}
        self.assistant: Turn | None = None
        self.turn_id: str | None = None
        self.user_seen = False
        self.replies = 0

    def start_task(self, turn_id: Any) -> None:
        tid = str(turn_id) if turn_id else None
        if tid is not None and tid == self.turn_id:
            return  # turn_context repeating the task's id
        self.turn_id, self.user_seen, self.replies, self.assistant = tid, False, 0, None

    def end_task(self) -> None:
        self.assistant = None  # what follows belongs to no reply of this task

    def user(self, line: int, text: str) -> None:
        uuid = self.turn_id if self.turn_id and not self.user_seen else f"L{line}"
        self.user_seen = True
        self.assistant = None
        self.turns.append(Turn("user", uuid, text))

    def reply(self, line: int) -> Turn:
        if self.assistant is None:
            self.replies += 1
            uuid = f"{self.turn_id}.{self.replies}" if self.turn_id else f"L{line}"
            self.assistant = Turn("assistant", uuid)
            self.turns.append(self.assistant)
        return self.assistant

    def call(self, line: int, call_id: Any, tool: ToolCall) -> None:
        self.reply(line).tools.append(tool)
        if call_id:
            self.pending[str(call_id)] = tool

    def result(self, call_id: Any, output: Any) -> None:
        tool = self.pending.get(str(call_id))
        if tool is not None:
            tool.output = _clip(_codex_output(output))


def _codex_user(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    text = str(p.get("message") or "").strip()
    images = [i for i in (p.get("images") or []) if i] + [i for i in (p.get("local_images") or []) if i]
    text = "\n".join([text, *("[image]" for _ in images)]).strip()
    if text:
        state.user(line, text)


def _codex_agent(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    message = str(p.get("message") or "")
    if message.strip():
        turn = state.reply(line)
        turn.text = _join(turn.text, message)


def _codex_function_call(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    args = p.get("arguments")
    if isinstance(args, str):
        with contextlib.suppress(ValueError):  # not JSON: show the raw string
            args = json.loads(args)
    state.call(line, p.get("call_id"), ToolCall(str(p.get("name") or "tool"), _render_input(args)))


def _codex_custom_call(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    state.call(line, p.get("call_id"), ToolCall(str(p.get("name") or "tool"), _render_input(p.get("input"))))


def _codex_web_search(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    action = p.get("action")
    query = action.get("query") if isinstance(action, Mapping) else None
    state.call(line, None, ToolCall("web_search", str(query or "")))


def _codex_output_item(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    state.result(p.get("call_id"), p.get("output"))


def _codex_item_text(content: Any) -> str:
    """Text of an ``item_completed`` item's content (blocks typed ``text`` or ``Text``; images as
    placeholders)."""
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = str(block.get("type") or "").lower()
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif "image" in kind:
            parts.append("[image]")
    return "\n".join(p for p in parts if p).strip()


def _codex_item(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    """Codex 0.171.0: ``event_msg`` ``item_completed`` with a ``UserMessage`` or ``AgentMessage``."""
    item = p.get("item")
    if not isinstance(item, Mapping):
        return
    text = _codex_item_text(item.get("content"))
    if not text:
        return
    if item.get("type") == "UserMessage":
        state.user(line, text)
    elif item.get("type") == "AgentMessage":
        turn = state.reply(line)
        turn.text = _join(turn.text, text)


def _codex_response_message(state: _CodexState, line: int, p: Mapping[str, Any]) -> None:
    """A ``response_item`` message, for rollouts that have neither message events nor completed
    items. User messages that are one wrapped block (``<environment_context>…``) are context the
    harness added, not what the user typed."""
    text = _codex_item_text(
        [{**b, "type": "text"} for b in p.get("content") or [] if isinstance(b, Mapping) and "text" in b]
    )
    if not text:
        return
    if p.get("role") == "user" and not (text.startswith("<") and text.endswith(">")):
        state.user(line, text)
    elif p.get("role") == "assistant":
        turn = state.reply(line)
        turn.text = _join(turn.text, text)


_CodexHandler = Callable[[_CodexState, int, Mapping[str, Any]], None]

#: Where a rollout keeps the conversation's messages, newest Codex last; a rollout is read from the
#: first of these it contains (versions that wrote two of them would otherwise show each twice).
#: Codex up to ~0.1xx wrote ``user_message``/``agent_message`` events; Codex 0.171.0 writes none and
#: keeps the messages in ``item_completed`` events (and in ``response_item`` messages, whose user
#: role also carries the harness's context blocks, hence last).
_CODEX_MESSAGE_SOURCES: tuple[dict[tuple[str, str], _CodexHandler], ...] = (
    {("event_msg", "user_message"): _codex_user, ("event_msg", "agent_message"): _codex_agent},
    {("event_msg", "item_completed"): _codex_item},
    {("response_item", "message"): _codex_response_message},
)

# (entry type, payload type) → handler; everything else (reasoning, token counts, ...) carries
# nothing the transcript shows. The message handlers are added per rollout (see above).
_CODEX_HANDLERS: dict[tuple[str, str], _CodexHandler] = {
    ("event_msg", "task_started"): lambda s, _line, p: s.start_task(p.get("turn_id")),
    ("event_msg", "task_complete"): lambda s, _line, _p: s.end_task(),
    ("response_item", "function_call"): _codex_function_call,
    ("response_item", "function_call_output"): _codex_output_item,
    ("response_item", "custom_tool_call"): _codex_custom_call,
    ("response_item", "custom_tool_call_output"): _codex_output_item,
    ("response_item", "web_search_call"): _codex_web_search,
}


def _parse_codex(src: _Source) -> list[Turn]:
    """Codex rollout JSONL.

    The original gave Codex turns no id. Ids here are stable across runs: when the rollout records
    Codex's own turn id (``task_started``/``turn_context`` ``turn_id``), the user prompt of that task
    gets it and the assistant turns ``<turn_id>.1``, ``.2``, ...; older rollouts without one get
    ``L<line>``, the line number of the entry that opened the turn (rollouts are append-only).
    """
    state = _CodexState()
    kinds = {
        (str(entry.get("type")), str(payload.get("type")))
        for _line, entry in src.entries
        if isinstance(payload := entry.get("payload"), Mapping)
    }
    messages = next((source for source in _CODEX_MESSAGE_SOURCES if kinds & source.keys()), {})
    handlers = {**_CODEX_HANDLERS, **messages}
    for line, entry in src.entries:
        payload = entry.get("payload")
        if not isinstance(payload, Mapping):
            continue
        if entry.get("type") == "turn_context":
            if payload.get("turn_id"):
                state.start_task(payload["turn_id"])
            continue
        handler = handlers.get((str(entry.get("type")), str(payload.get("type"))))
        if handler is not None:
            handler(state, line, payload)
    return [t for t in state.turns if t.text or t.tools]


# --- OpenClaw -------------------------------------------------------------------------------


def _is_openclaw_entry(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    return entry.get("type") == "message" and isinstance(message, Mapping) and "role" in message


def _parse_openclaw(src: _Source) -> list[Turn]:
    """OpenClaw session JSONL (and the same entries read from its SQLite database).

    Both shapes are read: tool calls as ``toolCall`` blocks (input in ``input``, ``parameters`` or
    ``arguments``) with results as ``toolResult`` blocks in the same message, and results as separate
    messages of role ``toolResult`` matched to their call by ``toolCallId``.
    """
    turns: list[Turn] = []
    pending: dict[str, ToolCall] = {}
    last: ToolCall | None = None
    for _, entry in src.entries:
        message = entry.get("message")
        if entry.get("type") != "message" or not isinstance(message, Mapping):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "toolResult":
            call = pending.get(str(message.get("toolCallId"))) or last
            if call is not None:
                out = _content_text(content)
                call.output = _clip(f"[error] {out}" if message.get("isError") else out)
            continue
        if role not in ("user", "assistant"):
            continue
        turn = Turn(str(role), str(entry.get("id") or ""))
        if isinstance(content, str):
            turn.text = content.strip()
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                turn.text = _join(turn.text, block["text"])
            elif kind == "image":
                turn.text = _join(turn.text, _image_placeholder(block))
            elif kind == "toolCall":
                name = block.get("name") or block.get("toolName") or "tool"
                raw = next((block[k] for k in ("input", "parameters", "arguments") if k in block), None)
                last = ToolCall(str(name), _render_input(raw))
                turn.tools.append(last)
                if block.get("id"):
                    pending[str(block["id"])] = last
            elif kind == "toolResult" and last is not None:
                raw_out = block.get("text") if block.get("text") is not None else block.get("content")
                last.output = _clip(_content_text(raw_out))
        turn.text = turn.text.strip()
        if turn.text or turn.tools:
            turns.append(turn)
    return turns


def openclaw_message_turns(messages: Iterable[Any]) -> list[Turn]:
    """Turns of the bare message objects an OpenClaw ``agent_end`` hook receives (``{role, content}``,
    no entry ids): parsed like the entries of a session transcript."""
    entries: list[Entry] = [(n, {"type": "message", "message": m}) for n, m in enumerate(messages, 1)]
    return _parse_openclaw(_Source(Path(), entries, None, []))


#: The table OpenClaw (2026.9.x) keeps session transcripts in, in ``openclaw-agent.sqlite``.
_OPENCLAW_EVENTS = "transcript_events"


def _zstd_decompress(data: bytes) -> bytes:
    try:
        from compression import zstd  # Python 3.14+
    except ImportError:
        from backports import zstd  # the backport, installed with memsearch on older Pythons
    plain: bytes = zstd.decompress(data)
    return plain


def _choose_session(src: _Source, con: sqlite3.Connection, newest_first: str, what: str) -> str | None:
    """The session of a host database to show (``newest_first`` lists its ids, newest first),
    recorded on ``src`` for the caller's header; None for an empty database."""
    session = _pick_session(src, [str(row[0]) for row in con.execute(newest_first)], what)
    src.session_shown = session
    return session


def _pick_session(src: _Source, sessions: list[str], what: str) -> str | None:
    """The session to show: the one asked for (exact or unique prefix), or the only one there is."""
    recent = ", ".join(sessions[:5]) + (", ..." if len(sessions) > 5 else "")
    if src.session is None:
        if len(sessions) <= 1:
            return sessions[0] if sessions else None
        raise OpenCodeSessionError(
            f"{src.path} holds {len(sessions)} {what} sessions; choose one with --session",
            f"most recent first: {recent}",
        )
    if src.session in sessions:
        return src.session
    matches = [s for s in sessions if s.startswith(src.session)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise OpenCodeSessionError(
            f"--session {src.session!r} matches {len(matches)} sessions in {src.path}",
            f"give more of the id: {', '.join(matches[:5])}",
        )
    raise OpenCodeSessionError(
        f"no {what} session {src.session!r} in {src.path}",
        f"sessions in this database, most recent first: {recent}" if sessions else "the database is empty",
    )


def _parse_openclaw_db(src: _Source) -> list[Turn]:
    """OpenClaw's agent database (``agents/<id>/agent/openclaw-agent.sqlite``), read-only.

    Each row of ``transcript_events`` is one entry of the session-JSONL format, as JSON text or, for
    entries of 1 KiB and more, zstd-compressed (``event_zstd``); rows are read in ``seq`` order and
    parsed like the JSONL file.
    """
    import sqlite3

    try:
        con = sqlite3.connect(src.path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot open OpenClaw database {src.path}: {exc}") from exc
    try:
        newest_first = (
            f"SELECT session_id, MAX(created_at) AS t FROM {_OPENCLAW_EVENTS} GROUP BY session_id "
            "ORDER BY t DESC, session_id"
        )
        session = _choose_session(src, con, newest_first, "OpenClaw")
        if session is None:
            return []
        rows = con.execute(
            f"SELECT seq, event_json, event_zstd FROM {_OPENCLAW_EVENTS} WHERE session_id = ? ORDER BY seq",
            (session,),
        ).fetchall()
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot read OpenClaw database {src.path}: {exc}") from exc
    finally:
        con.close()
    bad: list[str] = []
    for k, (seq, text, packed) in enumerate(rows, 1):
        try:
            raw = text if text is not None else _zstd_decompress(packed).decode("utf-8", errors="replace")
            entry = json.loads(raw)
        except Exception:  # a damaged row: skip it, as a malformed JSONL line is skipped
            entry = None
        if isinstance(entry, dict):
            # seq is the entry's "line"; a damaged row may have none (then its place in the order)
            src.entries.append((seq if isinstance(seq, int) else k, entry))
        else:
            bad.append(str(seq))
    if bad:
        src.warnings.append(
            f"{src.path}: skipped {len(bad)} unreadable transcript rows (first: seq {bad[0]})"
        )
    return _parse_openclaw(src)


# --- OpenCode -------------------------------------------------------------------------------


def _json_rows(rows: Iterable[tuple[str, Any]], bad: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for key, data in rows:
        try:
            obj = json.loads(data)
        except (TypeError, ValueError, RecursionError):  # not text, not JSON, nested thousands deep
            obj = None
        if isinstance(obj, dict):
            out.append((key, obj))
        else:
            bad.append(key)
    return out


def _opencode_part(turn: Turn, part: Mapping[str, Any]) -> None:
    kind = part.get("type")
    if kind == "text" and not part.get("synthetic") and isinstance(part.get("text"), str):
        turn.text = _join(turn.text, part["text"].strip())
    elif kind == "file":
        mime = str(part.get("mime") or "")
        label = "image" if mime.startswith("image/") else "file"
        name = part.get("filename") or mime
        turn.text = _join(turn.text, f"[{label}: {name}]" if name else f"[{label}]")
    elif kind == "tool":
        state = part.get("state")
        if not isinstance(state, Mapping):
            state = {}
        raw = state.get("output")
        output = f"[error] {state['error']}" if state.get("error") else raw if isinstance(raw, str) else ""
        turn.tools.append(
            ToolCall(str(part.get("tool") or "tool"), _render_input(state.get("input")), _clip(output))
        )


def _parse_opencode(src: _Source) -> list[Turn]:
    """OpenCode's SQLite database (``message`` and ``part`` tables, JSON in ``data``).

    One turn per user or assistant message, in ``time_created, id`` order. Text comes from
    non-synthetic ``text`` parts, tools from ``tool`` parts (input, clipped output or error); reasoning
    and step markers are not shown. The database is opened read-only.
    """
    import sqlite3

    uri = src.path.resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TranscriptReadError(f"cannot open OpenCode database {src.path}: {exc}") from exc
    try:
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise _unknown_format(src.path, f"{src.path} is not a readable SQLite database ({exc})") from exc
        if not {"message", "part"} <= tables:
            raise _unknown_format(src.path, f"{src.path} is a SQLite database without OpenCode's tables")
        try:
            newest_first = (
                "SELECT session_id, MAX(time_created) AS t FROM message GROUP BY session_id "
                "ORDER BY t DESC, session_id"
            )
            session = _choose_session(src, con, newest_first, "OpenCode")
            if session is None:
                return []
            messages_rows = con.execute(
                "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", (session,)
            ).fetchall()
            part_rows = con.execute(
                "SELECT p.message_id, p.data FROM part AS p JOIN message AS m ON p.message_id = m.id "
                "WHERE m.session_id = ? ORDER BY p.time_created, p.id",
                (session,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise TranscriptReadError(f"cannot read OpenCode database {src.path}: {exc}") from exc
    finally:
        con.close()
    bad: list[str] = []
    messages = _json_rows(messages_rows, bad)
    parts: dict[str, list[dict[str, Any]]] = {}
    for message_id, part in _json_rows(part_rows, bad):
        parts.setdefault(message_id, []).append(part)
    if bad:
        src.warnings.append(f"{src.path}: skipped {len(bad)} rows whose data is not a JSON object")
    turns: list[Turn] = []
    for message_id, data in messages:
        role = data.get("role")
        if role not in ("user", "assistant"):
            continue
        turn = Turn(str(role), message_id)
        for part in parts.get(message_id, []):
            _opencode_part(turn, part)
        if turn.text or turn.tools:
            turns.append(turn)
    return turns


# --- the format table -----------------------------------------------------------------------


@dataclass(frozen=True)
class TranscriptFormat:
    """How to recognise one format and how to parse it.

    ``magic`` recognises binary formats by their first bytes; ``entry_matches`` recognises a JSONL
    format by one entry. ``has_sessions`` marks containers of many sessions (``--session``).
    """

    label: str
    parse: Callable[[_Source], list[Turn]]
    magic: bytes | None = None
    entry_matches: Callable[[Mapping[str, Any]], bool] | None = None
    has_sessions: bool = False
    #: For a SQLite format: tables the database must have (tried before formats that name none).
    tables: frozenset[str] = frozenset()


#: Format name → detector and parser. JSONL detectors are tried in this order on each entry (the
#: original's order: Codex, OpenClaw, Claude Code).
FORMATS: dict[str, TranscriptFormat] = {
    "openclaw-db": TranscriptFormat(
        "OpenClaw agent SQLite",
        _parse_openclaw_db,
        magic=_SQLITE_MAGIC,
        has_sessions=True,
        tables=frozenset({_OPENCLAW_EVENTS}),
    ),
    "opencode": TranscriptFormat("OpenCode SQLite", _parse_opencode, magic=_SQLITE_MAGIC, has_sessions=True),
    "codex": TranscriptFormat("Codex rollout JSONL", _parse_codex, entry_matches=_is_codex_entry),
    "openclaw": TranscriptFormat("OpenClaw session JSONL", _parse_openclaw, entry_matches=_is_openclaw_entry),
    "claude": TranscriptFormat("Claude Code session JSONL", _parse_claude, entry_matches=_is_claude_entry),
}


# --- selecting ------------------------------------------------------------------------------


def find_turn(turns: Sequence[Turn], turn_id: str) -> int:
    """Index of the turn ``turn_id`` names: exact id, else id prefix, else the original's rule that the
    id starts with the first 8 characters of a turn's id. Raises :class:`TurnNotFoundError`.
    """
    rules: tuple[Callable[[str], bool], ...] = (
        lambda i: i == turn_id,
        lambda i: i.startswith(turn_id),
        lambda i: turn_id.startswith(i[:8]),
    )
    for rule in rules:
        for index, turn in enumerate(turns):
            if any(rule(i) for i in turn.ids()):
                return index
    raise TurnNotFoundError(
        f"no turn matches id {turn_id!r} ({len(turns)} turns in the transcript)",
        "run the command without --turn to see each turn's id after its role, or add --json-output; "
        "a unique prefix of an id is enough",
    )


def select_turns(turns: Sequence[Turn], turn_id: str | None, context: int = 3) -> list[Turn]:
    """The turn ``turn_id`` names with ``context`` turns on each side; all turns when no id is given.

    An id that matches nothing raises :class:`TurnNotFoundError` (the original silently returned
    everything, which hides a typo).
    """
    if not turn_id:
        return list(turns)
    index = find_turn(turns, turn_id)
    context = max(context, 0)
    return list(turns[max(index - context, 0) : index + context + 1])


def last_turn(turns: Sequence[Turn]) -> tuple[Turn | None, list[Turn]]:
    """The last user turn and the assistant turns that follow it: what an agent's Stop hook summarises.

    Returns ``(None, [])`` when there is no user turn (nothing was asked, so there is nothing to
    record). Turn texts are never truncated by the parsers; tool outputs are clipped, so a summariser
    that must not see tool output should use only ``text``.
    """
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role == "user":
            return turns[index], [t for t in turns[index + 1 :] if t.role == "assistant"]
    return None, []


# --- rendering ------------------------------------------------------------------------------


def turns_to_json(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """The original's ``--json-output`` list: ``{role, uuid, text, tools: [{name, command, output}]}``."""
    return [t.to_dict() for t in turns]


def _indent_rest(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def _render_turn(turn: Turn, selected: bool) -> str:
    heading = "### User" if turn.role == "user" else "### Assistant"
    if turn.uuid:
        heading += f" ({turn.uuid})"
    if selected:
        heading += " [selected]"
    lines = [heading]
    if turn.text:
        lines.append(turn.text)
    for tool in turn.tools:
        lines.append(f"- $ [{tool.name}] {_indent_rest(tool.command, '    ')}")
        if tool.output:
            lines.append(f"  → {_indent_rest(tool.output, '    ')}")
    return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_turns(
    turns: Sequence[Turn], *, selected: str | None = None, max_chars: int = MAX_RENDER_CHARS
) -> str:
    """Render turns as markdown-ish text: ``### User (id)`` / ``### Assistant (id)``, text, tools.

    A rendering longer than ``max_chars`` keeps what was asked for: the turn whose id is ``selected``
    in full plus as many neighbours as fit, or without a selection the newest turns. Omitted turns are
    counted in a marker line where they were cut. Returns ``""`` for no turns.
    """
    if not turns:
        return ""
    target = next((i for i, t in enumerate(turns) if selected and t.uuid == selected), None)
    blocks = [_render_turn(t, i == target) for i, t in enumerate(turns)]

    def size(i: int) -> int:
        return len(blocks[i]) + 2  # block + blank line separator

    anchor = len(blocks) - 1 if target is None else target
    lo, hi = anchor, anchor
    used = size(anchor)
    clipped_anchor = target is None and used > max_chars
    if target is None:
        while lo > 0 and used + size(lo - 1) <= max_chars:
            lo -= 1
            used += size(lo)
    else:
        grow_lo = grow_hi = True
        while grow_lo or grow_hi:
            if grow_lo:
                if lo > 0 and used + size(lo - 1) <= max_chars:
                    lo -= 1
                    used += size(lo)
                else:
                    grow_lo = False
            if grow_hi:
                if hi < len(blocks) - 1 and used + size(hi + 1) <= max_chars:
                    hi += 1
                    used += size(hi)
                else:
                    grow_hi = False
    kept = blocks[lo : hi + 1]
    if clipped_anchor:
        kept = [kept[0][:max_chars].rstrip() + "\n…[turn truncated]"]
    out: list[str] = []
    if lo > 0:
        out.append(f"…[{_plural(lo, 'earlier turn')} not shown; use --turn ID to see them]")
    out.extend(kept)
    if hi < len(blocks) - 1:
        out.append(f"…[{_plural(len(blocks) - 1 - hi, 'later turn')} not shown]")
    return "\n\n".join(out).strip() + "\n"
