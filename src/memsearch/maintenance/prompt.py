"""The prompt a task sends (template, current state, newest journals within a budget) and reading
the model's JSON answer out of whatever text surrounds it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.agent.framing import DATA_NOTE
from memsearch.engine.project_files import MAX_JOURNAL_BYTES
from memsearch.errors import MaintenanceError
from memsearch.maintenance.common import (
    JOURNAL_FILES,
    MAX_PROMPT_CHARS,
    MAX_TOOL_CALLS,
    TOOL_NAME,
    one_line,
    read_text,
    root_of,
)
from memsearch.maintenance.state import journal_paths

if TYPE_CHECKING:
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig
    from memsearch.maintenance.tasks import TaskRun


# --- the prompt -------------------------------------------------------------------------------


def recent_journals(
    input_dir: Path, budget: int, files: int = JOURNAL_FILES, root: Path | None = None
) -> str:
    """The newest ``files`` journals under ``input_dir`` (regular files inside ``root``, default
    ``input_dir``), oldest first, each redacted whole (:mod:`memsearch.exits`) and framed as data
    (:func:`memsearch.agent.framing.frame`, labelled with its name); when longer than ``budget``
    the oldest journals are left out or cut from the front (the newest entries always survive).
    Bytes that are not UTF-8 are replaced, never fatal."""
    from memsearch import exits
    from memsearch.agent.framing import frame

    inside = root or input_dir
    found: list[tuple[float, str, Path]] = []
    for path in journal_paths(input_dir, inside):
        with contextlib.suppress(OSError):
            found.append((path.lstat().st_mtime, path.name, path))
    found.sort()
    parts: list[str] = []
    used = 0
    for _, _, path in reversed(found[-files:] if files > 0 else []):
        text = exits.out(read_text(path, inside, max_bytes=MAX_JOURNAL_BYTES), "journal").strip()
        name = path.relative_to(input_dir).as_posix()
        framed = frame(text, name) + "\n"
        room = budget - used
        if len(framed) > room:
            marker = "[older journal text left out]\n"
            keep = room - len(frame("", name)) - len(marker) - 1
            if keep > 0:
                parts.append(marker + frame(text[-keep:], name) + "\n")
            elif not parts and budget > 0:
                parts.append(marker)
            break
        parts.append(framed)
        used += len(framed)
    return "".join(reversed(parts))


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
    root = root_of(ctx, run.input_dir, folder=True)
    journals = recent_journals(run.input_dir, max(0, budget - len(DATA_NOTE)), root=root)
    from memsearch import exits

    # the journals may predate redaction, PROJECT.md/USER.md may be hand-edited: each went through
    # the exits' redaction as it was read; the whole prompt passes once more (a template of the user's)
    return exits.out(
        f"{template.rstrip()}\n\n## {run.task.current_title}\n\n{current}\n\n"
        f"## Recent memory journals\n\n{DATA_NOTE}\n\n{journals.strip() or '(no journals)'}\n",
        "maintenance",
        ctx.config,
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
    shown = one_line(raw, 120) or "(empty)"
    raise MaintenanceError(
        f'The model did not answer with a JSON object holding "{key}" (it said: {shown}).',
        hint="Try again later or another model; a custom prompt must ask for the built-in JSON answer.",
    )
