"""Maintenance tasks: PROJECT.md, USER.md and skill candidates kept current from the journals.

The daily journals are what happened; above them sit files that say what is true now. Three tasks
keep them (configured per platform under ``[plugins.<platform>.<task>]``):

- ``project_review`` rewrites ``PROJECT.md`` (what the project is, how it works, open threads);
- ``user_profile`` rewrites ``USER.md`` (the user's stable preferences and workflows);
- ``memory_to_skill`` drafts skill candidates from repeated procedures (``memsearch.skills``).

Each task is one row of :data:`TASKS` (what it shows the model, how its answer is applied); the
runner around them is shared:

- a task is *due* when enabled, its ``min_interval_hours`` has passed since its last success and
  the journals changed since then (a content digest of ``input_dir``), or when forced;
- one ``flock`` per memory folder (``.maintenance.lock``) means two sessions never run at once: the
  second finds the lock held and leaves; the state file (``.maintenance-state.json``, keys
  ``<platform>.<task>`` as in the original) is only read and written under it;
- a failure is recorded in the state (``last_error``, ``last_failed_at``) and retried on a later
  run (after at most an hour), and never raised into a hook;
- the model is the task's ``provider``: an ``[llm.providers.<name>]`` entry (openai, anthropic,
  gemini), or ``native`` — the host's own CLI, as the summariser uses it, so no API key is needed.
  API models may look things up with :func:`run_memory_command`: only ``memsearch search``,
  ``expand`` and ``transcript`` on this project's memory, arguments validated, no shell, a few
  calls with bounded output.

The session-start hook calls :func:`start_due_tasks` (a cheap check, then a detached
``memsearch maintenance run --hook-worker``) and :func:`session_context` (PROJECT.md and USER.md
for the model, within :data:`CONTEXT_CHARS`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memsearch.errors import MaintenanceError, MemoryCommandRefusedError, MemSearchError, ServiceError

if TYPE_CHECKING:
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig
    from memsearch.hooks.base import HookContext
    from memsearch.llm import LLMSettings

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig

__all__ = [
    "CONTEXT_CHARS",
    "LOCK_FILE",
    "LOG_FILE",
    "STATE_FILE",
    "TASKS",
    "MemoryScope",
    "Outcome",
    "Task",
    "TaskRun",
    "check_due",
    "input_digest",
    "parse_answer",
    "recent_journals",
    "run_memory_command",
    "run_tasks",
    "session_context",
    "start_due_tasks",
    "validate_memory_command",
]

STATE_FILE = ".maintenance-state.json"
LOCK_FILE = ".maintenance.lock"
#: Where detached runs write what they did and what failed (started over once it grows large).
LOG_FILE = ".maintenance.log"
LOG_MAX = 1 << 20
#: The most characters sent to the model in one prompt (template + current state + journals). A host
#: CLI gets less: OpenCode takes the prompt as one argv element, which Linux caps at 128 KiB (40,000
#: characters of Chinese text is 120,000 bytes).
MAX_PROMPT_CHARS = 80_000
NATIVE_PROMPT_CHARS = 40_000
#: Journals shown to the model: the newest this many files.
JOURNAL_FILES = 14
#: Lookups (``run_memory_command`` calls) one task may make, characters of each result, seconds each.
MAX_TOOL_CALLS = 4
MAX_TOOL_OUTPUT = 12_000
TOOL_TIMEOUT = 30.0
#: Longest command the model may send, and longest search query.
MAX_COMMAND_CHARS = 1_000
MAX_QUERY_CHARS = 500
#: The largest PROJECT.md / USER.md accepted from a model, and skill candidates per answer.
MAX_OUTPUT_CHARS = 40_000
MAX_SKILLS = 10
#: A failed task is retried after ``min(min_interval_hours, this)`` hours.
RETRY_AFTER_HOURS = 1.0
#: Characters of PROJECT.md and USER.md shown at session start (together; a file may use what the
#: other leaves over).
CONTEXT_CHARS = 2_000
#: Seconds an API model may take for one answer.
MODEL_TIMEOUT = 300.0
#: The host CLI's model for a task that names none, where it should differ from the summariser's
#: (rewriting PROJECT.md is worth a stronger model than a turn summary; the original's choice).
NATIVE_MODELS: dict[str, str] = {"claude-code": "sonnet"}
#: The name of the lookup tool offered to API models.
TOOL_NAME = "run_memory_command"


# --- the task table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one task did: ``action`` is ``disabled``, ``skip``, ``locked``, ``none`` (ran, nothing
    to change), ``replace`` (file rewritten), ``distilled`` (candidates written) or ``error``."""

    task: str
    action: str
    reason: str = ""
    changed: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.action == "error"

    @property
    def ran(self) -> bool:
        return self.action in ("none", "replace", "distilled", "error")

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "action": self.action,
            "reason": self.reason,
            "changed": list(self.changed),
        }

    def line(self) -> str:
        detail = f": {self.reason}" if self.reason else ""
        changed = f" ({', '.join(self.changed)})" if self.changed else ""
        return f"{self.task}: {self.action}{changed}{detail}"


@dataclass
class TaskRun:
    """One task about to run: its row, the hook context, its settings and resolved paths."""

    task: Task
    ctx: HookContext
    settings: TaskSettings
    input_dir: Path
    #: The file the task maintains, or the candidate store for ``memory_to_skill``.
    output: Path
    digest: str


@dataclass(frozen=True)
class Task:
    """One maintenance task as data: what it shows the model and how the answer is applied."""

    name: str
    #: What the model's JSON answer must contain (``action`` or ``skills``).
    answer_key: str
    #: Heading and text of the current state shown to the model.
    current_title: str
    current: Callable[[TaskRun], str]
    apply: Callable[[TaskRun, Mapping[str, Any]], Outcome]
    #: Where the output goes when ``output_file`` is empty (file tasks only).
    default_output: str = ""


def _current_file(run: TaskRun) -> str:
    text = _read_text(run.output)
    return f"```markdown\n{text.strip()}\n```" if text.strip() else "(the file does not exist yet)"


def _apply_file(run: TaskRun, answer: Mapping[str, Any]) -> Outcome:
    action = answer.get("action")
    reason = _one_line(str(answer.get("reason") or ""), 300)
    if action == "none":
        return Outcome(run.task.name, "none", reason)
    if action != "replace":
        raise MaintenanceError(
            f'The model answered action {action!r}; only "none" and "replace" are understood.',
            hint="A custom prompt file must ask for the same JSON answer as the built-in one.",
        )
    content = answer.get("content")
    if not isinstance(content, str) or not content.strip():
        raise MaintenanceError('The model answered "replace" without the new file in "content".')
    if len(content) > MAX_OUTPUT_CHARS:
        raise MaintenanceError(
            f"The model's new {run.output.name} has {len(content):,} characters (at most "
            f"{MAX_OUTPUT_CHARS:,} are accepted)."
        )
    text = content.strip() + "\n"
    if _read_text(run.output) == text:
        return Outcome(run.task.name, "none", reason or "the new text is the same as the old")
    _write_atomic(run.output, text)
    return Outcome(run.task.name, "replace", reason, (str(run.output),))


def _current_skills(run: TaskRun) -> str:
    from memsearch import skills

    blocks = []
    for candidate in skills.list_candidates(run.ctx.memsearch_dir):
        try:
            body = candidate.body().strip()
        except (OSError, UnicodeDecodeError):
            body = "(unreadable)"
        if len(body) > 2_000:
            body = body[:2_000] + "\n…[rest left out]"
        blocks.append(
            f"### {candidate.slug} ({candidate.status})\n{candidate.description}\n\n```markdown\n{body}\n```"
        )
    return "\n\n".join(blocks) or "(none yet)"


def _apply_skills(run: TaskRun, answer: Mapping[str, Any]) -> Outcome:
    from memsearch import skills
    from memsearch.errors import SkillInputError

    items = answer.get("skills")
    if not isinstance(items, list):
        raise MaintenanceError('The model\'s answer has no "skills" list.')
    created: list[str] = []
    updated: list[str] = []
    skipped: list[str] = []
    for item in items[:MAX_SKILLS]:
        if not isinstance(item, dict):
            continue
        name = str(item.get("name") or "").strip()
        description = _one_line(str(item.get("description") or ""), 500)
        body = str(item.get("body") or "").strip()
        if not (name and description and body):
            continue
        try:
            result = skills.write_candidate(
                run.ctx.memsearch_dir,
                name,
                description,
                body,
                message=f"memory_to_skill: {name} from the journals ({run.ctx.platform.name})",
                occurrences=_count(item.get("occurrences")),
                sources=_sources(item.get("sources")),
            )
        except SkillInputError as exc:  # one malformed draft does not cost the others
            skipped.append(f"{name}: skipped ({exc.one_line()})")
            continue
        if result.action == "created":
            created.append(result.slug)
        elif result.action == "updated":
            updated.append(result.slug)
    if not (created or updated):
        return Outcome(run.task.name, "none", "; ".join(["no new or changed candidate", *skipped]))
    summary = ", ".join(
        part
        for part in (f"{len(created)} new" if created else "", f"{len(updated)} revised" if updated else "")
        if part
    )
    return Outcome(run.task.name, "distilled", summary, tuple(created + updated))


#: Task name → row, in the order they run.
TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            "project_review",
            "action",
            "Current PROJECT.md",
            _current_file,
            _apply_file,
            ".memsearch/PROJECT.md",
        ),
        Task("user_profile", "action", "Current USER.md", _current_file, _apply_file, ".memsearch/USER.md"),
        Task("memory_to_skill", "skills", "Existing skill candidates", _current_skills, _apply_skills),
    )
}


# --- paths, digest, state ---------------------------------------------------------------------


def resolve_path(raw: str, project_dir: Path, memsearch_dir: Path) -> Path:
    """A configured ``input_dir``/``output_file``: ``.memsearch/...`` is inside the memory folder in
    use (so a shared ``MEMSEARCH_DIR`` gets its own PROJECT.md), other relative paths are under the
    project, ``~`` is expanded."""
    text = raw.strip()
    if text.rstrip("/") == ".memsearch":
        return memsearch_dir
    if text.startswith(".memsearch/"):
        return memsearch_dir / text[len(".memsearch/") :]
    path = Path(text).expanduser()
    return path if path.is_absolute() else project_dir / path


def task_settings(ctx: HookContext, name: str) -> TaskSettings:
    settings: TaskSettings = getattr(ctx.plugin, name)
    return settings


def task_paths(ctx: HookContext, task: Task, settings: TaskSettings) -> tuple[Path, Path]:
    """The task's input folder and its output (a file, or the candidate store)."""
    input_dir = resolve_path(settings.input_dir or ".memsearch/memory", ctx.project_dir, ctx.memsearch_dir)
    if task.answer_key == "skills":
        from memsearch import skills

        return input_dir, skills.candidates_root(ctx.memsearch_dir)
    raw = getattr(settings, "output_file", "") or task.default_output
    return input_dir, resolve_path(raw, ctx.project_dir, ctx.memsearch_dir)


def input_digest(input_dir: Path) -> str:
    """A digest of every markdown file under ``input_dir`` (names and bytes): the journals changed
    exactly when it changes. A touched but unchanged file keeps it."""
    digest = hashlib.sha256()
    if not input_dir.is_dir():
        return "sha256:empty"
    for path in sorted(input_dir.rglob("*.md")):
        with contextlib.suppress(OSError):
            if not path.is_file():
                continue
            data = path.read_bytes()
            digest.update(f"{path.relative_to(input_dir).as_posix()}\0{len(data)}\0".encode())
            digest.update(data)
    return f"sha256:{digest.hexdigest()}"


def input_stamp(input_dir: Path) -> str:
    """A cheap fingerprint of the journals (names, sizes, modification times; no reading): when it
    equals the one recorded at the last success, the journals are untouched and the hook need not
    hash them."""
    digest = hashlib.sha256()
    if input_dir.is_dir():
        for path in sorted(input_dir.rglob("*.md")):
            with contextlib.suppress(OSError):
                st = path.stat()
                digest.update(
                    f"{path.relative_to(input_dir).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode()
                )
    return f"stat:{digest.hexdigest()}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _stamp(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def load_state(memsearch_dir: Path) -> dict[str, dict[str, Any]]:
    """The state file; a missing or damaged one counts as empty (every task is then due)."""
    try:
        data = json.loads((memsearch_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _save_state(memsearch_dir: Path, state: Mapping[str, Any]) -> None:
    _write_atomic(memsearch_dir / STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")


def state_key(platform: str, task: str) -> str:
    return f"{platform}.{task}"


def check_due(
    settings: TaskSettings,
    entry: Mapping[str, Any],
    digest: str | None,
    *,
    now: dt.datetime | None = None,
    force: bool = False,
) -> tuple[bool, str]:
    """Whether a task should run now, and why (or why not). ``digest`` None skips the journal
    check (the hook's first, cheap look)."""
    if force:
        return True, "forced"
    now = now or _now()
    if digest is not None and entry.get("last_input_digest") == digest:
        return False, "journals unchanged since the last run"
    interval = max(0, settings.min_interval_hours)
    succeeded = _parse_time(entry.get("last_success_at"))
    failed = _parse_time(entry.get("last_failed_at"))
    if failed is not None and (succeeded is None or failed > succeeded):
        wait = min(float(interval), RETRY_AFTER_HOURS)
        if now - failed < dt.timedelta(hours=wait):
            return False, f"the last attempt failed; retrying {wait:g} h after it"
        return True, "retrying after a failure"
    if succeeded is None:
        return True, "never run"
    if now - succeeded < dt.timedelta(hours=interval):
        return False, f"ran less than {interval} h ago"
    return True, "due"


@contextlib.contextmanager
def run_lock(memsearch_dir: Path) -> Iterator[bool]:
    """Hold the memory folder's maintenance lock; yields False (at once) when another process has
    it. A ``flock`` dies with its holder, so a crashed run never leaves the tasks locked."""
    import fcntl

    memsearch_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(memsearch_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield True
    finally:
        os.close(fd)


# --- the prompt -------------------------------------------------------------------------------


def recent_journals(input_dir: Path, budget: int, files: int = JOURNAL_FILES) -> str:
    """The newest ``files`` markdown files under ``input_dir``, oldest first, each after a
    ``<!-- journal: name -->`` line; when longer than ``budget`` the oldest text is cut (the newest
    entries always survive). Bytes that are not UTF-8 are replaced, never fatal."""
    found: list[tuple[float, str, Path]] = []
    if input_dir.is_dir():
        for path in input_dir.rglob("*.md"):
            with contextlib.suppress(OSError):
                if path.is_file():
                    found.append((path.stat().st_mtime, path.name, path))
    found.sort()
    parts = []
    for _, _, path in found[-files:] if files > 0 else []:
        text = _read_text(path)
        parts.append(f"<!-- journal: {path.relative_to(input_dir).as_posix()} -->\n{text.strip()}\n")
    text = "\n".join(parts)
    if len(text) <= budget:
        return text
    if budget <= 0:
        return ""
    marker = "[older journal text left out]\n"
    return (marker + text[-(budget - len(marker)) :]) if budget > len(marker) else text[-budget:]


def _tools_note(tools: bool) -> str:
    if not tools:
        return " You cannot open those conversations here; rely on the notes."
    return (
        f" You may call the {TOOL_NAME} tool (at most {MAX_TOOL_CALLS} times) with one read command: "
        "`memsearch transcript <file> [--turn <id>]` to read an original conversation named by an "
        "anchor, `memsearch expand <chunk_hash>` to see a memory section in full, or "
        '`memsearch search "<query>"` to find related notes.'
    )


def build_prompt(run: TaskRun, *, tools: bool, limit: int = MAX_PROMPT_CHARS) -> str:
    """The task's prompt: its template (``prompts.<task>`` or the built-in one) with the
    placeholders filled, the current state, then the newest journals within the budget."""
    from memsearch.prompts import load_prompt

    ctx = run.ctx
    name = run.task.name
    template = load_prompt(name, override_path=getattr(ctx.config.prompts, name, "") or None)
    note = _tools_note(tools)
    values = {
        "{{AGENT_NAME}}": ctx.platform.agent_name,
        "{{TASK_NAME}}": name,
        "{{PROJECT_DIR}}": str(ctx.project_dir),
        "{{INPUT_DIR}}": str(run.input_dir),
        "{{OUTPUT_FILE}}": str(run.output),
        "{{MIN_OCCURRENCES}}": str(getattr(run.settings, "min_occurrences", 1)),
        "{{TOOLS_NOTE}}": note,
    }
    placed = "{{TOOLS_NOTE}}" in template
    for marker, value in values.items():
        template = template.replace(marker, value)
    if tools and not placed:
        template += "\n" + note.strip() + "\n"
    current = run.task.current(run)
    budget = limit - len(template) - len(current) - 200
    journals = recent_journals(run.input_dir, max(0, budget))
    return (
        f"{template.rstrip()}\n\n## {run.task.current_title}\n\n{current}\n\n"
        f"## Recent memory journals\n\n{journals.strip() or '(no journals)'}\n"
    )


# --- the answer -------------------------------------------------------------------------------


def _balanced_end(text: str, start: int) -> int | None:
    """Index after the bracket closing the one at ``start`` (strings respected), or None."""
    stack: list[str] = []
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index + 1
    return None


def _top_level_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text`` that are not inside another JSON value, in order.

    Prose around them, code fences and invalid bracketed spans are skipped; a value cut off
    midway ends the scan, so nothing nested inside it is mistaken for the answer.
    """
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    cursor = 0
    while True:
        starts = [i for i in (text.find("{", cursor), text.find("[", cursor)) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            skip = _balanced_end(text, start)
            if skip is None:
                return found
            cursor = skip
            continue
        if isinstance(value, dict):
            found.append(value)
        cursor = end


def parse_answer(raw: str, key: str) -> dict[str, Any]:
    """The model's answer: the last top-level JSON object in ``raw`` that has ``key``."""
    for value in reversed(_top_level_objects(raw)):
        if key in value:
            return dict(value)
    shown = _one_line(raw, 120) or "(empty)"
    raise MaintenanceError(
        f'The model did not answer with a JSON object holding "{key}" (it said: {shown}).',
        hint="Try again later or another model; a custom prompt must ask for the built-in JSON answer.",
    )


# --- lookups offered to the model ---------------------------------------------------------------


@dataclass
class MemoryScope:
    """What a model's lookups may touch: this project's collection and the conversations its
    journals name (``transcript:``/``rollout:``/``db:`` anchors), and how many calls are left."""

    project_dir: Path
    collection: str
    transcripts: frozenset[str]
    calls_left: int = MAX_TOOL_CALLS

    @classmethod
    def of(cls, ctx: HookContext, input_dir: Path) -> MemoryScope:
        return cls(ctx.project_dir, ctx.collection, anchored_transcripts(input_dir))


#: Anchor fields that name a conversation file.
TRANSCRIPT_FIELDS = ("transcript", "rollout", "db")


def anchored_transcripts(input_dir: Path) -> frozenset[str]:
    """Resolved paths of the conversation files that the journals under ``input_dir`` name."""
    from memsearch.journal import parse_anchor_fields

    found: set[str] = set()
    if not input_dir.is_dir():
        return frozenset()
    for path in input_dir.rglob("*.md"):
        for line in _read_text(path).splitlines():
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
    from memsearch.hooks.base import DISABLE_ENV, NO_WATCH_ENV
    from memsearch.hooks.processes import memsearch_argv

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
    return out or "(no output)"


def _command_of(arguments: Any) -> str:
    """The ``command`` argument of a tool call, whatever shape it came in."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return ""
    return str(arguments.get("command", "")) if isinstance(arguments, dict) else ""


_TOOL_DESCRIPTION = (
    'Run one read-only memsearch command on this project\'s memory: `memsearch search "<query>"`, '
    "`memsearch expand <chunk_hash>` or `memsearch transcript <file> [--turn <id>]`."
)
_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"command": {"type": "string", "description": "The memsearch command line."}},
    "required": ["command"],
}


# --- asking the model -------------------------------------------------------------------------

#: Put before a prompt sent to a host CLI: that agent may otherwise chat around the JSON.
HOST_PREAMBLE = "Reply with the JSON object only: no tools, no questions, no text around it.\n\n"


def ask_model(run: TaskRun, prompt_for: Callable[[bool, int], str]) -> str:
    """The model's raw answer for ``run``: from its API provider (OpenAI, Anthropic or Gemini, each
    with the lookup tool) or, for ``native``, from the host's own CLI (no key needed, no lookups).
    ``prompt_for(tools, limit)`` builds the prompt for whether lookups are offered, within ``limit``."""
    provider = (run.settings.provider or "").strip()
    if provider in ("", "native"):
        summarizer = run.ctx.platform.native_summarizer
        if summarizer is None:
            raise MaintenanceError(
                f"{run.ctx.platform.agent_name} has no CLI memsearch can ask.",
                hint=f"Set plugins.{run.ctx.platform.name}.{run.task.name}.provider to an "
                "[llm.providers.<name>] entry.",
            )
        text = summarizer(
            _with_model(run.ctx, run.settings.model or NATIVE_MODELS.get(run.ctx.platform.name, "")),
            HOST_PREAMBLE + prompt_for(False, NATIVE_PROMPT_CHARS),
        )
        if text is None:
            raise MaintenanceError(
                f"The {run.ctx.platform.agent_name} CLI gave no usable answer.",
                hint=f"See {run.ctx.memsearch_dir / LOG_FILE} for why; the task is retried on a later run.",
            )
        return text
    from memsearch.llm import LLMSettings, backend_type

    settings = LLMSettings.named(run.ctx.config, provider)
    if run.settings.model:
        settings = replace(settings, model=run.settings.model)
    kind = backend_type(settings.provider)
    scope = MemoryScope.of(run.ctx, run.input_dir)
    if kind == "openai":
        return _ask_openai(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)
    if kind == "anthropic":
        return _ask_anthropic(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)
    return _ask_gemini(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)


def _with_model(ctx: HookContext, model: str) -> HookContext:
    """``ctx`` with the task's model where the host summariser reads its model (the summarize
    setting), so ``<task>.model`` also picks the host CLI's model."""
    if not model:
        return ctx
    import copy
    import dataclasses

    cfg = copy.deepcopy(ctx.config)
    cfg.plugins.platform(ctx.platform.name).summarize.model = model
    return dataclasses.replace(ctx, _config=cfg)


def _ask_openai(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """Chat completions with the lookup tool: answer tool calls until the model replies in text."""
    import openai
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    from memsearch.http import CONNECT_TIMEOUT, PLACEHOLDER_KEY, sdk_errors
    from memsearch.llm import _prepare

    _, call = _prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    client = openai.OpenAI(
        api_key=call.api_key or PLACEHOLDER_KEY,
        base_url=call.base_url,
        max_retries=1,
        timeout=openai.Timeout(call.timeout, connect=CONNECT_TIMEOUT),
    )
    url = f"{call.base_url}/chat/completions"
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": TOOL_NAME, "description": _TOOL_DESCRIPTION, "parameters": _TOOL_PARAMETERS},
        }
    ]
    messages: list[Any] = [{"role": "user", "content": prompt}]
    try:
        for _ in range(MAX_TOOL_CALLS + 2):
            choice: Literal["auto", "none"] = "auto" if scope.calls_left > 0 else "none"
            with sdk_errors(call.errors, url, call.timeout):
                response = client.chat.completions.create(
                    model=call.model, messages=messages, tools=tools, tool_choice=choice
                )
            if isinstance(response, (str, bytes)) or not getattr(response, "choices", None):
                raise call.errors.bad_response(url, "no choices in the answer")
            message = response.choices[0].message
            calls = [
                c for c in (message.tool_calls or []) if isinstance(c, ChatCompletionMessageFunctionToolCall)
            ]
            if not calls:
                return message.content or ""
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            for c in calls:
                output = run_memory_command(_command_of(c.function.arguments), scope)
                messages.append({"role": "tool", "tool_call_id": c.id, "content": output})
    finally:
        client.close()
    raise MaintenanceError("The model kept asking for lookups and never answered.")


def _ask_anthropic(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """The Messages API with the lookup tool, as one JSON POST per round (no SDK)."""
    from memsearch.http import JsonClient
    from memsearch.llm import ANTHROPIC_MAX_TOKENS, ANTHROPIC_VERSION, _prepare, _versioned

    _, call = _prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    url = f"{_versioned(call.base_url, 'v1')}/messages"
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if call.api_key:
        headers["x-api-key"] = call.api_key
    tool = {"name": TOOL_NAME, "description": _TOOL_DESCRIPTION, "input_schema": _TOOL_PARAMETERS}
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    with JsonClient() as client:  # one connection for every round of the conversation
        for _ in range(MAX_TOOL_CALLS + 2):
            body: dict[str, Any] = {
                "model": call.model,
                "max_tokens": ANTHROPIC_MAX_TOKENS,
                "messages": messages,
                "tools": [tool],
                "tool_choice": {"type": "auto" if scope.calls_left > 0 else "none"},
            }
            payload = client.post_json(url, body, headers=headers, errors=call.errors, timeout=call.timeout)
            blocks = payload.get("content") if isinstance(payload, dict) else None
            if not isinstance(blocks, list):
                raise call.errors.bad_response(url, "no 'content' list in the answer")
            blocks = [b for b in blocks if isinstance(b, dict)]
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if not uses:
                return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            messages.append({"role": "assistant", "content": blocks})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": str(b.get("id", "")),
                            "content": run_memory_command(_command_of(b.get("input")), scope),
                        }
                        for b in uses
                    ],
                }
            )
    raise MaintenanceError("The model kept asking for lookups and never answered.")


def _ask_gemini(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """``generateContent`` with the lookup tool as a function declaration, one JSON POST per round.
    The model's turns are sent back as it gave them (thought signatures included)."""
    from memsearch.http import JsonClient
    from memsearch.llm import _prepare, _versioned

    _, call = _prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    url = f"{_versioned(call.base_url, 'v1beta')}/models/{call.model.removeprefix('models/')}:generateContent"
    headers = {"x-goog-api-key": call.api_key} if call.api_key else {}
    declaration = {
        "name": TOOL_NAME,
        "description": _TOOL_DESCRIPTION,
        "parameters": {
            "type": "OBJECT",
            "properties": {"command": {"type": "STRING", "description": "The memsearch command line."}},
            "required": ["command"],
        },
    }
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": prompt}]}]
    with JsonClient() as client:  # one connection for every round of the conversation
        for _ in range(MAX_TOOL_CALLS + 2):
            body = {
                "contents": contents,
                "tools": [{"functionDeclarations": [declaration]}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO" if scope.calls_left > 0 else "NONE"}},
            }
            payload = client.post_json(url, body, headers=headers, errors=call.errors, timeout=call.timeout)
            candidates = payload.get("candidates") if isinstance(payload, dict) else None
            content = candidates[0].get("content") if isinstance(candidates, list) and candidates else None
            if not isinstance(content, dict):
                raise call.errors.bad_response(url, "no candidate content in the answer")
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            uses = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            if not uses:
                return "".join(str(p.get("text", "")) for p in parts if not p.get("thought"))
            contents.append({"role": "model", "parts": parts})
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": str(use.get("name", TOOL_NAME)),
                                "response": {
                                    "output": run_memory_command(_command_of(use.get("args")), scope)
                                },
                            }
                        }
                        for use in uses
                    ],
                }
            )
    raise MaintenanceError("The model kept asking for lookups and never answered.")


# --- running ----------------------------------------------------------------------------------

#: Replaces the model step (tests and callers that bring their own model).
Asker = Callable[[TaskRun, Callable[[bool, int], str]], str]


def run_tasks(
    ctx: HookContext,
    *,
    only: Sequence[str] | None = None,
    force: bool = False,
    explicit: bool = False,
    ask: Asker | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Run the due tasks of ``ctx``'s platform (``only`` some); never raises for a task's failure.

    ``explicit`` (a task named on the command line) runs it even when disabled; ``force`` ignores
    the interval and the digest. Files written are indexed afterwards, like a journal.
    """
    names = [n for n in TASKS if only is None or n in only]
    if not explicit and not any(task_settings(ctx, n).enabled for n in names):
        return [Outcome(n, "disabled") for n in names]  # nothing to do: touch no file
    with run_lock(ctx.memsearch_dir) as locked:
        if not locked:
            return [Outcome(n, "locked", "another maintenance run is in progress") for n in names]
        state = load_state(ctx.memsearch_dir)
        outcomes = [
            _run_one(ctx, TASKS[n], state, force=force, explicit=explicit, ask=ask or ask_model)
            for n in names
        ]
    written = [Path(p) for o in outcomes if o.action == "replace" for p in o.changed]
    if written:
        index_files(ctx, written, log=log)
    return outcomes


def _run_one(
    ctx: HookContext, task: Task, state: dict[str, dict[str, Any]], *, force: bool, explicit: bool, ask: Asker
) -> Outcome:
    settings = task_settings(ctx, task.name)
    if not settings.enabled and not explicit:
        return Outcome(task.name, "disabled")
    input_dir, output = task_paths(ctx, task, settings)
    digest = input_digest(input_dir)
    key = state_key(ctx.platform.name, task.name)
    entry = state.get(key, {})
    due, why = check_due(settings, entry, digest, force=force)
    if not due:
        return Outcome(task.name, "skip", why)
    stamp = input_stamp(input_dir)
    run = TaskRun(task, ctx, settings, input_dir, output, digest)
    try:
        raw = ask(run, lambda tools, limit: build_prompt(run, tools=tools, limit=limit))
        outcome = task.apply(run, parse_answer(raw, task.answer_key))
    except Exception as exc:  # recorded and retried later; a maintenance failure never escapes
        detail = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
        now = _stamp(_now())
        state[key] = {
            **entry,
            "last_checked_at": now,
            "last_failed_at": now,
            "failed_input_digest": digest,
            "last_action": "error",
            "last_error": detail[:2000],
            "output_file": str(output),
        }
        _save_state(ctx.memsearch_dir, state)
        return Outcome(task.name, "error", detail)
    now = _stamp(_now())
    state[key] = {
        "last_checked_at": now,
        "last_success_at": now,
        "last_input_digest": digest,
        "last_input_stamp": stamp,
        "last_action": outcome.action,
        "output_file": str(output),
    }
    _save_state(ctx.memsearch_dir, state)
    return outcome


def index_files(ctx: HookContext, files: Sequence[Path], log: Callable[[str], None] | None = None) -> None:
    """Index rewritten PROJECT.md/USER.md like a journal (through the memory service when one
    runs). A failure is logged, never raised: the file is written and the next run retries."""
    from memsearch.memory import open_memory

    say = log or (lambda message: None)
    paths = [str(f) for f in files]
    try:
        description = ctx.description()
        with open_memory(ctx.config, paths, description=description) as memory:
            try:
                memory.run(memory.index_with_report())
                return
            except ServiceError as exc:  # only the service raises it: index here instead
                say(f"memory service unavailable ({exc.one_line()}); indexing directly")
        with open_memory(ctx.config, paths, service=False, description=description) as memory:
            memory.run(memory.index_with_report())
    except Exception as exc:
        detail = exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"
        say(f"{', '.join(f.name for f in files)} written but not indexed: {detail}")


# --- the session-start hook -------------------------------------------------------------------


def due_tasks(ctx: HookContext) -> list[str]:
    """The tasks of ``ctx``'s platform that would run now (enabled, interval passed, journals
    changed). Reads the config, the state file and the journals; runs nothing."""
    state = load_state(ctx.memsearch_dir)
    names = []
    for task in TASKS.values():
        settings = task_settings(ctx, task.name)
        if not settings.enabled:
            continue
        entry = state.get(state_key(ctx.platform.name, task.name), {})
        if not check_due(settings, entry, None)[0]:
            continue  # the interval has not passed: no need to read the journals
        input_dir, _ = task_paths(ctx, task, settings)
        if entry.get("last_action") != "error" and entry.get("last_input_stamp") == input_stamp(input_dir):
            continue  # the journals are untouched since the last success: no need to hash them
        if check_due(settings, entry, input_digest(input_dir))[0]:
            names.append(task.name)
    return names


def lock_held(memsearch_dir: Path) -> bool:
    """Whether a maintenance run holds the lock right now."""
    if not (memsearch_dir / LOCK_FILE).exists():
        return False
    with run_lock(memsearch_dir) as locked:
        return not locked


def start_due_tasks(ctx: HookContext) -> int | None:
    """Start a detached ``memsearch maintenance run --hook-worker`` when a task is due and no run
    is in progress; its pid, or None. The hook does not wait for it."""
    from memsearch.hooks import processes

    if not due_tasks(ctx) or lock_held(ctx.memsearch_dir):
        return None
    log = ctx.memsearch_dir / LOG_FILE
    try:
        keep = log.stat().st_size < LOG_MAX
    except OSError:
        keep = True
    argv = processes.memsearch_argv("maintenance", "run", "--platform", ctx.platform.name, "--hook-worker")
    payload = json.dumps(ctx.to_json()).encode("utf-8")
    return processes.spawn_detached(argv, stdin_data=payload, log=log, append=keep, cwd=ctx.project_dir)


def session_context(ctx: HookContext, budget: int = CONTEXT_CHARS) -> str:
    """PROJECT.md and USER.md (where ``project_review``/``user_profile`` write them) for the model,
    together within ``budget`` characters; a cut file says where the rest is. "" when neither exists."""
    files: list[tuple[str, Path, str]] = []
    for name in ("project_review", "user_profile"):
        task = TASKS[name]
        _, path = task_paths(ctx, task, task_settings(ctx, name))
        text = _read_text(path).strip()
        if text:
            files.append((Path(task.default_output).name, path, text))
    parts: list[str] = []
    left = budget
    for index, (label, path, text) in enumerate(files):
        share = left // (len(files) - index)
        head = f"[memsearch] {label} ({path}):\n"
        room = share - len(head)
        if room <= 0:
            continue
        if len(text) > room:
            tail = f"\n…(cut; the whole file is {path})"
            cut = text[: max(0, room - len(tail))]
            cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
            text = cut.rstrip() + tail
        parts.append(head + text)
        left -= len(head) + len(text)
    return "\n\n".join(parts)


# --- small helpers ----------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader (or a crash)
    never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777  # a rewrite keeps the file's permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # a new file gets what open() would give it, not mkstemp's 0600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _count(value: Any) -> int | None:
    """A model's ``occurrences``: a positive int, or None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _sources(value: Any) -> list[str]:
    """A model's ``sources``: up to 50 journal names, each at most 200 characters."""
    return [x[:200] for x in value if isinstance(x, str)][:50] if isinstance(value, list) else []


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rstrip() + " …"
