"""The task table: one row per maintenance task (what it shows the model, how its answer is
applied), and what a run of one task produced (:class:`Outcome`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import MaintenanceError
from memsearch.maintenance.common import (
    MAX_OUTPUT_CHARS,
    MAX_SKILLS,
    count_of,
    one_line,
    read_text,
    root_of,
    sources_of,
    write_text,
)

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig


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
    from memsearch import exits
    from memsearch.agent.framing import frame

    text = exits.out(read_text(run.output, root_of(run.ctx, run.output)), "journal", run.ctx.config)
    return frame(text, run.output.name) if text.strip() else "(the file does not exist yet)"


def _apply_file(run: TaskRun, answer: Mapping[str, Any]) -> Outcome:
    action = answer.get("action")
    reason = one_line(str(answer.get("reason") or ""), 300)
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
    from memsearch import redact
    from memsearch.maintenance.history import record_run

    redactor = redact.current(run.ctx.config, run.ctx.env)
    text = redactor.text(content, "maintenance").strip() + "\n"
    before = read_text(run.output, root_of(run.ctx, run.output))
    if before == text:
        return Outcome(run.task.name, "none", reason or "the new text is the same as the old")
    # recorded first (for review: keep or revert), so no rewrite ever goes unrecorded; the text
    # before is kept as memsearch keeps any text: without private spans and secrets
    ctx = run.ctx
    kept = redactor.text(before, "maintenance")
    record_run(ctx.memsearch_dir, run.task.name, ctx.platform.name, run.output, kept, text, reason)
    write_text(run.output, text)
    return Outcome(run.task.name, "replace", reason, (str(run.output),))


def _current_skills(run: TaskRun) -> str:
    from memsearch import skills
    from memsearch.agent.framing import frame

    blocks = []
    for candidate in skills.list_candidates(run.ctx.memsearch_dir):
        try:
            body = candidate.body().strip()
        except (OSError, UnicodeDecodeError):
            body = "(unreadable)"
        if len(body) > 2_000:
            body = body[:2_000] + "\n…[rest left out]"
        blocks.append(
            f"### {candidate.slug} ({candidate.status})\n"
            + frame(f"{candidate.description}\n\n{body}", f"{candidate.slug}/SKILL.md")
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
        description = one_line(str(item.get("description") or ""), 500)
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
                occurrences=count_of(item.get("occurrences")),
                sources=sources_of(item.get("sources")),
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
