"""``memsearch skills``: review skill candidates distilled from memory and install them.

The store is ``$MEMSEARCH_DIR/skill-candidates`` when ``MEMSEARCH_DIR`` is set (relative to the
current folder), else ``./.memsearch/skill-candidates`` — the original's rule. Installing is the
only step that makes a skill live, so it is always explicit: a destination is required, and a
``SKILL.md`` that memsearch did not write is replaced only with ``--force``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import click

from memsearch import skills as store
from memsearch.cli.maintenance_cmd import distill
from memsearch.cli.render import shown

#: How ``skills list`` shows each status (the original's words: candidate/installed, then whether
#: an install or an update is ready).
STATUS_TEXT = {
    "pending": ("candidate", ", install ready"),
    "installed": ("installed", ""),
    "changed": ("installed", ", update ready"),
    "rejected": ("rejected", ""),
}


def memsearch_dir(cwd: Path | None = None) -> Path:
    """``$MEMSEARCH_DIR`` (relative to the current folder), else ``./.memsearch``."""
    project = (cwd or Path.cwd()).absolute()
    explicit = os.environ.get("MEMSEARCH_DIR", "").strip()
    if not explicit:
        return project / ".memsearch"
    path = Path(explicit).expanduser()
    return path if path.is_absolute() else project / path


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@click.group("skills")
def skills() -> None:
    """Review and install skills distilled from memory (candidates in .memsearch/skill-candidates)."""


skills.add_command(distill)  # the model side lives with the maintenance tasks


@skills.command("add")
@click.option("--name", required=True, help="Skill name (made into the folder and command name).")
@click.option(
    "--description", required=True, help="One line: what the skill does and when it should be used."
)
@click.option(
    "--body-file",
    required=True,
    type=click.File("rb"),
    help="File with the SKILL.md body (markdown, no front matter); - reads stdin.",
)
def add(name: str, description: str, body_file: IO[bytes]) -> None:
    """Save a skill an agent drafted as a candidate (one git commit; no model is called)."""
    result = store.write_candidate(
        memsearch_dir(),
        name,
        description,
        store.decode_body(body_file.read(), body_file.name),
        message=f"Add candidate {store.slugify(name)} (manual)",
    )
    verb = {"created": "Added", "updated": "Updated"}.get(result.action)
    if verb:
        click.echo(f"{verb} candidate skill: {result.slug}")
    else:
        click.echo(f"Candidate skill {result.slug} is unchanged.")
    click.echo(f"Install it with: memsearch skills install {result.slug} --platform <host> (or --path <dir>)")


@skills.command("list")
@click.option("--json-output", "-j", is_flag=True, help="Output as JSON.")
def list_(json_output: bool) -> None:
    """List the candidates and whether each is installed."""
    from memsearch import exits

    candidates = store.list_candidates(memsearch_dir())
    if json_output:
        _echo_json([exits.fields(c.to_dict(), "skills", ("name", "description")) for c in candidates])
        return
    if not candidates:
        click.echo("No skills in the store yet.")
        return
    for c in candidates:
        word, ready = STATUS_TEXT.get(c.status, (c.status, ""))
        seen = f", seen {c.occurrences}x" if c.occurrences is not None else ""
        click.echo(f"- {c.slug} [{word}{seen}{ready}] - {exits.out(c.description, 'skills')}")


def _summary(root_dir: Path) -> dict[str, Any]:
    candidates = store.list_candidates(root_dir)
    waiting = [c for c in candidates if c.status in store.WAITING]
    installs = {
        c.slug: [{"path": s.path, "state": s.state} for s in store.install_states(c)] for c in candidates
    }
    return {
        "root": str(store.candidates_root(root_dir)),
        "candidate_count": len(candidates),
        "pending_count": len(waiting),
        "new_count": sum(c.status == "pending" for c in waiting),
        "updated_count": sum(c.status == "changed" for c in waiting),
        "pending_names": [c.slug for c in waiting],
        "installs": {slug: rows for slug, rows in installs.items() if rows},
    }


@skills.command("status")
@click.option("--json-output", "-j", is_flag=True, help="Output as JSON.")
@click.option("--hint", is_flag=True, help="Print only the session-start hint (nothing when none waits).")
def status(json_output: bool, hint: bool) -> None:
    """Say whether candidates wait for review, and check the installed copies."""
    root_dir = memsearch_dir()
    if hint:
        line = store.candidates_hint(root_dir)
        if line:
            click.echo(line)
        return
    summary = _summary(root_dir)
    if json_output:
        _echo_json(summary)
        return
    if summary["pending_count"] == 0:
        click.echo("No candidate skill versions pending install.")
    else:
        click.echo(store.candidates_hint(root_dir))
        click.echo(f"New: {summary['new_count']}; updated: {summary['updated_count']}.")
    for slug, rows in summary["installs"].items():
        for row in rows:
            if row["state"] != "current":
                click.echo(f"{slug}: installed copy {row['path']} is {row['state']}")


@skills.command("install")
@click.argument("name")
@click.option(
    "--path",
    "paths",
    multiple=True,
    help="A skills folder to install into (repeatable), e.g. .claude/skills.",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    type=click.Choice(list(store.HOST_SKILL_DIRS)),
    help="Install where this host reads skills (repeatable): in the project, or with --user for the user.",
)
@click.option(
    "--user", "user_level", is_flag=True, help="With --platform: the user-level folder (all projects)."
)
@click.option(
    "--force", is_flag=True, help="Replace a SKILL.md memsearch did not write (kept as SKILL.md.bak)."
)
@click.option("--json-output", "-j", is_flag=True, help="Output as JSON.")
def install(
    name: str,
    paths: tuple[str, ...],
    platforms: tuple[str, ...],
    user_level: bool,
    force: bool,
    json_output: bool,
) -> None:
    """Install candidate NAME into agent skills folders (a copy; the candidate keeps evolving)."""
    if user_level and not platforms:
        from memsearch.errors import NoInstallTargetError

        raise NoInstallTargetError("--user needs --platform", "e.g. --platform codex --user")
    project = Path.cwd()
    targets = [project / Path(p).expanduser() for p in paths]
    targets += [store.host_skill_dir(p, project, user=user_level) for p in platforms]
    results = store.install_candidate(memsearch_dir(), name, targets, force=force)
    if json_output:
        _echo_json(
            [
                {"path": str(r.path), "action": r.action, "backup": str(r.backup) if r.backup else None}
                for r in results
            ]
        )
        return
    for r in results:
        if r.action == "unchanged":
            click.echo(f"Already installed: {shown(r.path)}")
        elif r.action == "replaced":
            click.echo(f"Installed: {shown(r.path)} (replaced; the previous file is {shown(r.backup)})")
        else:
            click.echo(f"Installed: {shown(r.path)}")
    click.echo("Start a new agent session to load it.")


@skills.command("reject")
@click.argument("name")
def reject(name: str) -> None:
    """Turn down candidate NAME's current version (it stops waiting for review; one commit).

    A revised version from the distiller waits for review again; installing it anyway undoes this.
    """
    slug = store.reject_candidate(memsearch_dir(), name)
    click.echo(f"Rejected candidate skill: {slug} (it no longer waits for review).")
