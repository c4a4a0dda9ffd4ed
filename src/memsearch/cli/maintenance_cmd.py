"""``memsearch maintenance run|status`` and ``memsearch skills distill``: the maintenance tasks by hand.

The plugins run due tasks in the background from their session-start hook (a detached
``maintenance run --hook-worker``); these commands run them on demand and show their state. A task
named with ``--task`` (and ``skills distill``) runs even when it is not enabled: asking for it
explicitly is never a surprise; ``--force`` also ignores the interval and the journal digest.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from memsearch.cli.render import plural, shown
from memsearch.config import PLUGIN_PLATFORMS, PLUGIN_TASKS

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.maintenance import Outcome

#: The maintenance tasks (``summarize`` is the per-turn summariser, not one of them).
TASK_NAMES = tuple(t for t in PLUGIN_TASKS if t != "summarize")
#: Hosts with a hook engine (every platform the configuration knows).
HOOK_PLATFORMS = PLUGIN_PLATFORMS

_platform_option = click.option(
    "--platform",
    "--plugin",
    "platform",
    type=click.Choice(HOOK_PLATFORMS),
    default=None,
    help="Whose [plugins.<platform>] settings, state and host CLI to use "
    "(default: the first platform with a maintenance task enabled, else claude-code).",
)


def _context(platform: str | None) -> HookContext:
    """The same context a hook of this project would have (project, memory folder, collection)."""
    from memsearch.agent.hooks.base import HookContext, HookInput
    from memsearch.agent.hooks.engine import get_platform

    ctx = HookContext.build(get_platform(platform or "claude-code"), "maintenance", HookInput())
    if platform is None:
        plugins = ctx.config.plugins
        for name in HOOK_PLATFORMS:
            settings = plugins.platform(name)
            if any(getattr(settings, task).enabled for task in TASK_NAMES):
                if name != ctx.platform.name:
                    ctx = HookContext.build(get_platform(name), "maintenance", HookInput())
                break
    return ctx


def _report(outcomes: list[Outcome], json_output: bool) -> None:
    from memsearch.errors import MaintenanceError

    if json_output:
        click.echo(json.dumps([o.to_json() for o in outcomes], ensure_ascii=False))
    else:
        for outcome in outcomes:
            click.echo(outcome.line())
    failed = [o for o in outcomes if o.failed]
    if failed:
        raise MaintenanceError(
            f"{plural(len(failed), 'maintenance task')} failed: {', '.join(o.task for o in failed)}.",
            hint="The reasons are above and in the state file; a later run retries them.",
        )


@click.group("maintenance")
def maintenance() -> None:
    """Keep PROJECT.md, USER.md and skill candidates current from the journals."""


@maintenance.command("run")
@click.option(
    "--task", "tasks", type=click.Choice(TASK_NAMES), multiple=True, help="Run only this task (repeatable)."
)
@click.option(
    "--force", is_flag=True, help="Run even if the journals are unchanged or the interval has not passed."
)
@_platform_option
@click.option("--json-output", "-j", is_flag=True, help="Print the outcomes as JSON.")
@click.option("--hook-worker", is_flag=True, hidden=True, help="Run as the session hook's detached worker.")
def run(
    tasks: tuple[str, ...], force: bool, platform: str | None, json_output: bool, hook_worker: bool
) -> None:
    """Run the maintenance tasks that are due (or those named with --task)."""
    from memsearch import maintenance as mt

    if hook_worker:
        _hook_worker(platform or "claude-code")
        return
    ctx = _context(platform)
    outcomes = mt.run_tasks(
        ctx,
        only=list(tasks) or None,
        force=force,
        explicit=bool(tasks),
        log=lambda message: click.echo(f"memsearch maintenance: {message}", err=True),
    )
    _report(outcomes, json_output)


def _hook_worker(platform: str) -> None:
    """The detached run the session-start hook starts: its context on stdin, its log on stdout."""
    import datetime as dt

    from memsearch import maintenance as mt
    from memsearch.agent.hooks.base import HookContext
    from memsearch.agent.hooks.engine import get_platform

    def log(message: str) -> None:
        click.echo(f"{dt.datetime.now().isoformat(timespec='seconds')} {platform}: {message}")

    try:
        ctx = HookContext.from_json(get_platform(platform), json.loads(sys.stdin.buffer.read()))
        for outcome in mt.run_tasks(ctx, log=log):
            if outcome.ran:
                log(outcome.line())
    except Exception as exc:  # a background run must never leave a traceback behind
        log(f"maintenance failed: {type(exc).__name__}: {exc}")


@maintenance.command("status")
@_platform_option
@click.option("--json-output", "-j", is_flag=True, help="Print the status as JSON.")
def status(platform: str | None, json_output: bool) -> None:
    """Show each task's settings, last run and whether it is due now."""
    from memsearch import maintenance as mt

    ctx = _context(platform)
    state = mt.load_state(ctx.memsearch_dir)
    rows = []
    for task in mt.TASKS.values():
        settings = mt.task_settings(ctx, task.name)
        input_dir, output = mt.task_paths(ctx, task, settings)
        entry = state.get(mt.state_key(ctx.platform.name, task.name), {})
        due, why = mt.check_due(
            settings, entry, mt.input_digest(input_dir, mt.root_of(ctx, input_dir, folder=True))
        )
        rows.append(
            {
                "task": task.name,
                "enabled": settings.enabled,
                "provider": settings.provider or "native",
                "output": str(output),
                "due": settings.enabled and due,
                "why": why if settings.enabled else "disabled",
                "last_success_at": entry.get("last_success_at", ""),
                "last_action": entry.get("last_action", ""),
                "last_error": entry.get("last_error", "") if entry.get("last_action") == "error" else "",
            }
        )
    if json_output:
        click.echo(json.dumps({"platform": ctx.platform.name, "tasks": rows}, ensure_ascii=False))
        return
    click.echo(f"platform: {ctx.platform.name}   memory: {shown(ctx.memsearch_dir)}")
    for row in rows:
        state_text = "enabled" if row["enabled"] else "disabled"
        click.echo(f"{row['task']}: {state_text}, provider {row['provider']}, writes {shown(row['output'])}")
        click.echo(
            f"  last run: {row['last_success_at'] or 'never'} ({row['last_action'] or '-'}); {row['why']}"
        )
        if row["last_error"]:
            click.echo(f"  last error: {row['last_error']}")


@maintenance.command("history")
@_platform_option
@click.option("--all", "everything", is_flag=True, help="Also the runs already kept or reverted.")
@click.option("--json-output", "-j", is_flag=True, help="Print the runs as JSON (with their texts).")
def history(platform: str | None, everything: bool, json_output: bool) -> None:
    """Show what maintenance changed in PROJECT.md and USER.md, run by run, with a diff.

    Each rewrite waits for review: `maintenance keep RUN` accepts it, `maintenance revert RUN`
    puts the text before it back.
    """
    from memsearch.maintenance.history import list_runs, unified_diff

    ctx = _context(platform)
    runs = list_runs(ctx.memsearch_dir, status=("new", "kept", "reverted") if everything else ("new",))
    if json_output:
        click.echo(json.dumps([{**r.summary(), "diff": unified_diff(r)} for r in runs], ensure_ascii=False))
        return
    if not runs:
        click.echo("No maintenance rewrite waits for review." if not everything else "No rewrites recorded.")
        return
    for run in runs:
        click.echo(f"{run.id}  {run.task} rewrote {shown(run.file)} at {run.at} [{run.status}]")
        if run.reason:
            click.echo(f"  why: {shown(run.reason)}")
        for line in unified_diff(run).splitlines():
            click.echo(f"  {line}")


@maintenance.command("keep")
@click.argument("run_id", metavar="RUN")
@_platform_option
def keep(run_id: str, platform: str | None) -> None:
    """Accept maintenance run RUN's rewrite (it leaves the review list)."""
    from memsearch.maintenance.history import decide

    run = decide(_context(platform).memsearch_dir, run_id, "kept")
    click.echo(f"Kept {run.task}'s rewrite of {shown(run.file)} ({run.id}).")


@maintenance.command("revert")
@click.argument("run_id", metavar="RUN")
@_platform_option
def revert(run_id: str, platform: str | None) -> None:
    """Put back the text PROJECT.md or USER.md had before maintenance run RUN (and reindex it).

    Refused when the file changed since that run wrote it (a later run, an edit by hand).
    """
    from memsearch.maintenance import history

    ctx = _context(platform)
    run = history.revert(ctx.memsearch_dir, run_id)
    history.reindex(ctx.config, run, ctx.description())
    click.echo(f"Reverted {run.task}'s rewrite of {shown(run.file)} ({run.id}).")


@click.command("distill")
@_platform_option
@click.option(
    "--force", is_flag=True, help="Run even if the journals are unchanged or the interval has not passed."
)
@click.option("--json-output", "-j", is_flag=True, help="Print the outcome as JSON.")
def distill(platform: str | None, force: bool, json_output: bool) -> None:
    """Draft skill candidates from repeated work in the journals (the memory_to_skill task, now).

    Uses plugins.<platform>.memory_to_skill.provider: an [llm.providers.<name>] entry, or
    "native" (the default), the host's own CLI. Candidates land in .memsearch/skill-candidates;
    nothing is installed (see `memsearch skills install`).
    """
    from memsearch import maintenance as mt

    ctx = _context(platform)
    outcomes = mt.run_tasks(ctx, only=["memory_to_skill"], force=force, explicit=True)
    _report(outcomes, json_output)
