"""Every change the console makes: one table of actions, each the CLI's own operation.

A button posts a form (with the CSRF token, ``guard``) to ``/act/<name>``; the row runs the
library function the CLI command runs, with the same wording of its outcome, and the page the
person came from shows it (a flash message, after a redirect: reloading never posts twice):

================  ===================================================
``skill-accept``  ``skills install NAME --platform P [--user]``
``skill-reject``  ``skills reject NAME``
``run-keep``      ``maintenance keep RUN``
``run-revert``    ``maintenance revert RUN`` (and the file reindexed)
``redact``        ``scan --redact`` on the project's memory folder (the journals kept)
``forget``        ``forget`` of what the confirmation page listed
``restore``       ``forget --undo ID`` / ``scan --restore ID`` (a backup of this project)
================  ===================================================

Forgetting asks first, as the CLI does: ``/forget`` lists the blocks that would go (file, lines,
heading, a redacted preview) and the form carries their digests; the post selects again and goes
on only when the same blocks are still there, byte for byte. An action the CLI can undo gets an
undo row here (one entry of :data:`ACTIONS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.console.exits import shown
from memsearch.console.html import el, link, url
from memsearch.console.inbox_view import action_form, backups_of
from memsearch.console.web import Reply, Request

if TYPE_CHECKING:
    from memsearch.console.projects import Project
    from memsearch.console.server import Console
    from memsearch.engine.forget import Block
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

__all__ = ["ACTIONS", "forget_page", "run_action"]


@dataclass(frozen=True)
class Action:
    """``run`` does it and says what it did (the CLI's words); a MemSearchError says why not."""

    run: Callable[[Project, Request], str]


def _accept(project: Project, request: Request) -> str:
    from memsearch.cli.render import plural
    from memsearch.errors import InvalidArgumentError
    from memsearch.skills import HOST_SKILL_DIRS, host_skill_dir, install_candidate

    platform = request.arg("platform")
    if platform not in HOST_SKILL_DIRS:
        raise InvalidArgumentError(f"no host {platform!r} to install into", hint=", ".join(HOST_SKILL_DIRS))
    target = host_skill_dir(platform, project.scope.project_dir, user=bool(request.arg("user")))
    results = install_candidate(
        project.memsearch_dir, request.arg("slug"), [target], force=bool(request.arg("force"))
    )
    done = []
    for r in results:
        if r.action == "unchanged":
            done.append(f"Already installed: {r.path}")
        elif r.action == "replaced":
            done.append(f"Installed: {r.path} (replaced; the previous file is {r.backup})")
        else:
            done.append(f"Installed: {r.path}")
    return f"{'; '.join(done)}. Start a new agent session to load it ({plural(len(results), 'copy')})."


def _reject(project: Project, request: Request) -> str:
    from memsearch.skills import reject_candidate

    slug = reject_candidate(project.memsearch_dir, request.arg("slug"))
    return f"Rejected candidate skill: {slug} (it no longer waits for review)."


def _keep(project: Project, request: Request) -> str:
    from memsearch.maintenance.history import decide

    run = decide(project.memsearch_dir, request.arg("run"), "kept")
    return f"Kept {run.task}'s rewrite of {run.file} ({run.id})."


def _revert(project: Project, request: Request) -> str:
    from memsearch.maintenance import history

    run = history.revert(project.memsearch_dir, request.arg("run"))
    history.reindex(project.config, run, project.scope.description())
    return f"Reverted {run.task}'s rewrite of {run.file} ({run.id})."


def _redact(project: Project, request: Request) -> str:
    from memsearch import redact
    from memsearch.cli.render import plural
    from memsearch.engine import secret_scan

    r = project.config.redact
    redactor = redact.from_settings(True, r.notes, r.patterns, r.allow, env={})
    files = secret_scan.memory_files([project.memory_dir])
    with project.memory() as memory:
        outcome, done = secret_scan.redact_journals(
            files, redactor, memory, project.config, redact.current(project.config)
        )
    if not done:
        return "No secrets in the journals: nothing was rewritten."
    lines = [f"Redacted {plural(n, 'item')} in {path}" for path, n in done.items()]
    return "; ".join(lines) + "." + _kept(outcome.backup, "the journals as they were", "scan --restore")


def _kept(backup: str, what: str, command: str) -> str:
    """The sentence naming the backup a change kept, and the two ways to give it back."""
    if not backup:
        return ""
    return f" Kept {what}: backup {backup} (Restore in the inbox, or `memsearch {command} {backup}`)."


def _restore(project: Project, request: Request) -> str:
    from memsearch.cli.render import plural
    from memsearch.engine import backups, forget_apply
    from memsearch.errors import BackupNotFoundError

    backup_id = request.arg("backup")
    if backup_id not in {b.id for b in backups_of(project)}:
        raise BackupNotFoundError(
            f"no backup {backup_id!r} of this project's files is kept",
            hint="the inbox lists the backups a restore can give back",
        )
    restored = backups.restore(backup_id)
    indexed = [r.path for r in restored if r.indexed]
    chunks = forget_apply.reindex_restored(project.config, indexed) if indexed else 0
    return f"Restored backup {backup_id}: {plural(len(restored), 'file')}, {plural(chunks, 'chunk')} indexed."


def _forget(project: Project, request: Request) -> str:
    from memsearch.cli.render import plural
    from memsearch.cli.undo import completed_line
    from memsearch.engine import forget_apply
    from memsearch.errors import ForgetConflictError

    confirmed = set(request.args("block"))
    with project.memory() as memory:
        recovered = forget_apply.recover(project.config)
        blocks = _blocks(project, memory, request)
        if not confirmed or {_block_id(b) for b in blocks} != confirmed:
            raise ForgetConflictError(
                "the memory changed since the confirmation was shown; nothing was forgotten",
                hint="open the forget page again to see what is there now",
            )
        outcome = forget_apply.forget_blocks(blocks, memory, project.config, _redactors(project)[0])
    done = (
        f"Forgot {plural(len(blocks), 'block')}: {plural(len(outcome.changed), 'file')} rewritten, "
        f"{plural(len(outcome.removed), 'journal')} removed, "
        f"{plural(outcome.cache_deleted, 'cached vector')} deleted, reindexed."
    )
    done += _kept(outcome.backup, "the notes as they were", "forget --undo")
    recovered_line = completed_line(recovered)
    return (f"{recovered_line} " if recovered_line else "") + done


#: Action name (``/act/<name>``) → row.
ACTIONS: dict[str, Action] = {
    "skill-accept": Action(_accept),
    "skill-reject": Action(_reject),
    "run-keep": Action(_keep),
    "run-revert": Action(_revert),
    "redact": Action(_redact),
    "forget": Action(_forget),
    "restore": Action(_restore),
}


def _safe_next(value: str, fallback: str) -> str:
    """A page of this console to go back to (never another site: ``//host`` or a scheme)."""
    if value.startswith("/") and not value.startswith("//") and "\\" not in value and "\n" not in value:
        return value
    return fallback


def run_action(console: Console, request: Request) -> Reply:
    from memsearch.errors import MemSearchError

    action = ACTIONS[request.path.removeprefix("/act/")]
    project = console.one(request)
    try:
        ok, message = True, action.run(project, request)
    except MemSearchError as exc:
        ok, message = False, f"Error: {exc.one_line()}"
    if "application/json" in request.headers.get("accept", ""):
        return Reply.json({"ok": ok, "message": shown(message)}, 200 if ok else 400)
    target = _safe_next(request.arg("next"), url("/", p=project.key))
    joiner = "&" if "?" in target else "?"
    return Reply.redirect(f"{target}{joiner}done={console.flash(ok, shown(message))}")


# --- forget's confirmation ------------------------------------------------------------------------


def _redactors(project: Project) -> tuple[Redactor, Redactor]:
    """(the one ``index`` uses, the one for previews: always on), as ``memsearch forget``."""
    from memsearch import redact

    r = project.config.redact
    return redact.current(project.config), redact.from_settings(True, r.notes, r.patterns, r.allow, env={})


def _blocks(project: Project, memory: Memory, request: Request) -> list[Block]:
    """The blocks the request's selector names: a chunk (a search hit, an expand), or a journal
    entry of this project (its ``journal``'s name and the ``line`` of its heading: a timeline entry)."""
    from memsearch.console.memory_view import journal_of
    from memsearch.engine.forget import select_blocks
    from memsearch.errors import ForgetTargetError

    chunk = request.arg("chunk")
    entry = None
    if request.arg("journal"):
        try:
            entry = (journal_of(project, request.arg("journal")), int(request.arg("line")))
        except ValueError:
            raise ForgetTargetError("line is not a number", hint="open the entry from the timeline") from None
    if not chunk and entry is None:
        raise ForgetTargetError("nothing named to forget", hint="pick an entry or a hit first")
    return select_blocks(
        memory,
        project.config,
        chunk_hashes=[chunk] if chunk else [],
        entry=entry,
        redactors=_redactors(project),
    )


def _block_id(block: Block) -> str:
    return f"{block.path}:{block.start}:{block.end}:{block.digest}"


def forget_page(console: Console, request: Request) -> Reply:
    from memsearch.cli.render import plural
    from memsearch.errors import NothingToForgetError

    project = console.one(request)
    with project.memory() as memory:
        blocks = _blocks(project, memory, request)
    if not blocks:
        raise NothingToForgetError(
            "nothing matches: no memory was forgotten", hint="the entry may be gone already"
        )
    listed = []
    for b in blocks:
        ids = " ".join(f"{k}:{b.anchor[k]}" for k in ("session", "turn") if b.anchor.get(k))
        listed.append(
            el(
                "li",
                el("span", f"{shown(_relative(project, b.path))} {b.span}", class_="path"),
                f"  {shown(b.heading)}" if b.heading else "",
                el("span", f" [{shown(ids)}]", class_="session") if ids else None,
                el("p", shown(b.preview), class_="preview") if b.preview else None,
            )
        )
    fields = {
        "p": project.key,
        "chunk": request.arg("chunk") or None,
        "journal": request.arg("journal") or None,
        "line": request.arg("line") or None,
        "next": url("/", p=project.key),
    }
    confirm = [el("input", type="hidden", name="block", value=_block_id(b)) for b in blocks]
    body = [
        el("h1", "Forget"),
        el("p", f"Will forget {plural(len(blocks), 'block')}:"),
        el("ul", listed, class_="blocks"),
        el(
            "p",
            "It goes from the markdown, the index and the embedding cache. What it takes out of a "
            "hand-written note is kept for a restore (the inbox lists it); a journal entry is not.",
        ),
        el(
            "div",
            action_form(
                console, "forget", f"Forget {plural(len(blocks), 'block')}", fields, confirm, danger=True
            ),
            link("Cancel", "/", p=project.key),
            class_="buttons",
        ),
    ]
    return console.render(request, "Forget", body, active="/")


def _relative(project: Project, path: Path) -> str:
    try:
        return str(path.relative_to(project.scope.project_dir))
    except ValueError:
        return str(path)
