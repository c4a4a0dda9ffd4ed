"""The maintenance tasks' limits and the small text/file helpers every part of them uses."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.project_files import MAX_SMALL_FILE_BYTES, is_inside, read_project_text
from memsearch.files import atomic_write

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext

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


# --- small helpers ----------------------------------------------------------------------------


def read_text(path: Path, root: Path, *, max_bytes: int = MAX_SMALL_FILE_BYTES) -> str:
    """A project file's text (journal, PROJECT.md, USER.md) when it is a regular file inside
    ``root`` and within ``max_bytes``; "" otherwise (:mod:`memsearch.engine.project_files`)."""
    return read_project_text(path, root, max_bytes=max_bytes)


def root_of(ctx: HookContext, path: Path, *, folder: bool = False) -> Path:
    """The folder ``path`` (a task's file, or its input folder with ``folder``) must stay inside
    when read: the project's (``ctx.files_root``) when the path is there, else the folder the
    user's own config named."""
    root = ctx.files_root
    if is_inside(path, root, resolve=False):
        return root
    return path if folder else path.parent


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in one step (temporary file and rename: a reader, or a crash,
    never sees half a file). A rewrite keeps the file's permissions; a new file gets the usual
    mode (0666 less the umask)."""
    atomic_write(path, text, keep_mode=True)


def count_of(value: Any) -> int | None:
    """A model's ``occurrences``: a positive int, or None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def sources_of(value: Any) -> list[str]:
    """A model's ``sources``: up to 50 journal names, each at most 200 characters."""
    return [x[:200] for x in value if isinstance(x, str)][:50] if isinstance(value, list) else []


def one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rstrip() + " …"
