"""Installing a candidate into the agents' skills folders: where each host reads skills, the
copy (never silently over a file memsearch did not write), and how recorded installs look now."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.engine import written
from memsearch.engine.project_files import read_project_bytes
from memsearch.errors import (
    NoInstallTargetError,
    SkillExistsError,
    SkillInputError,
    SkillMetaError,
)
from memsearch.files import atomic_write
from memsearch.skills.names import SKILL_FILE, content_hash, same_version, utc_now
from memsearch.skills.repo import (
    commit_all,
    ensure_repo,
    file_errors,
    keep_manual_edits,
    store_lock,
    write_meta,
)
from memsearch.skills.store import Candidate, candidates_root, read_candidate, read_meta, read_skill_bytes

#: Where each host reads skills: platform -> (project-level folder relative to the project,
#: user-level folder). ``~`` and ``$VAR`` are expanded; see :func:`host_skill_dir` for the
#: environment variables each host honours.
HOST_SKILL_DIRS: dict[str, tuple[str, str]] = {
    "claude-code": (".claude/skills", "~/.claude/skills"),
    "codex": (".agents/skills", "~/.agents/skills"),
    "openclaw": ("skills", "~/.openclaw/skills"),
    "opencode": (".opencode/skills", "~/.config/opencode/skills"),
    # DSH 0.1.0-rc.8 also reads .agents/skills (Codex's); its own folders keep a skill to DSH.
    "dsh": (".dsh/skills", "~/.dsh/skills"),
}


@dataclass(frozen=True)
class InstallResult:
    """One destination of an install: ``action`` is ``created``, ``updated``, ``unchanged`` or
    ``replaced`` (a file memsearch did not write, replaced with ``force``; the old one is kept as
    ``backup``)."""

    path: Path
    action: str
    backup: Path | None = None


def host_skill_dir(
    platform: str, project_dir: Path, *, user: bool = False, env: Mapping[str, str] | None = None
) -> Path:
    """The folder ``platform`` reads skills from: in the project, or for the user (all projects).
    Honoured: ``CLAUDE_CONFIG_DIR`` (Claude Code), ``OPENCLAW_STATE_DIR`` (OpenClaw),
    ``XDG_CONFIG_HOME`` (OpenCode), ``DSH_HOME`` (DeepSeek Harness)."""
    env = os.environ if env is None else env
    try:
        project_rel, user_dir = HOST_SKILL_DIRS[platform]
    except KeyError:
        raise SkillInputError(
            f"unknown platform {platform!r}", f"use one of: {', '.join(HOST_SKILL_DIRS)}"
        ) from None
    if not user:
        return Path(project_dir) / project_rel
    home = Path(env.get("HOME") or Path.home())
    overrides = {
        "claude-code": ("CLAUDE_CONFIG_DIR", "skills"),
        "openclaw": ("OPENCLAW_STATE_DIR", "skills"),
        "opencode": ("XDG_CONFIG_HOME", "opencode/skills"),
        "dsh": ("DSH_HOME", "skills"),
    }
    var, tail = overrides.get(platform, ("", ""))
    if var and env.get(var, "").strip():
        return Path(env[var].strip()).expanduser() / tail
    return home / user_dir.removeprefix("~/")


def install_candidate(
    memsearch_dir: Path,
    name: str,
    destinations: Sequence[Path],
    *,
    force: bool = False,
) -> list[InstallResult]:
    """Copy a candidate's SKILL.md into each skills folder in ``destinations`` (as
    ``<folder>/<slug>/SKILL.md``) and record the install in the store (one commit).

    A ``SKILL.md`` already there that memsearch did not put there (a user's own skill, or an
    installed copy edited since) is never overwritten silently: the whole install is refused with
    :class:`~memsearch.errors.SkillExistsError` before anything is written, unless ``force``,
    which keeps the old file as ``SKILL.md.bak`` (``.bak.1``, ... when one is there). Whether
    memsearch put it there is memsearch's own record (:mod:`memsearch.engine.written`), never the
    store's ``meta.json``, which a cloned repository can fill with anything."""
    if not destinations:
        raise NoInstallTargetError(
            "no install destination given",
            "pass --platform (claude-code, codex, openclaw, opencode, dsh) or --path <skills folder>",
        )
    memsearch_dir = Path(memsearch_dir)
    root = candidates_root(memsearch_dir)
    with file_errors(f"install {name}"), store_lock(memsearch_dir):
        candidate = read_candidate(memsearch_dir, name)
        data = read_skill_bytes(candidate.path.parent)
        if data is None:
            raise SkillMetaError(
                f"{candidate.path} is not a regular file of the store; nothing was installed"
            )
        digest = content_hash(data)
        shown = _shown(data)
        shown_digest = content_hash(shown)
        targets = list(
            dict.fromkeys(Path(d).expanduser().absolute() / candidate.slug / SKILL_FILE for d in destinations)
        )
        plan: list[tuple[Path, str]] = []
        foreign: list[Path] = []
        for target in targets:
            action = _action(target, shown)
            if action == "foreign":
                foreign.append(target)
            else:
                plan.append((target, action))
        if foreign and not force:
            listed = ", ".join(str(p) for p in foreign)
            raise SkillExistsError(
                f"{listed} already exists and is not a copy memsearch installed (a skill of yours, or "
                "an installed copy edited since); nothing was installed",
                "compare the two files, then run again with --force to replace it "
                "(the old file is kept as SKILL.md.bak), or install to another --path",
            )
        plan += [(p, "replaced") for p in foreign]
        results: list[InstallResult] = []
        for target, action in plan:
            backup: Path | None = None
            if action == "replaced":
                backup = _free_backup_name(target)
                os.replace(target, backup)
            if action != "unchanged":
                atomic_write(target, shown)
            written.record_install(target, shown_digest)
            results.append(InstallResult(target, action, backup))
        ensure_repo(root)
        keep_manual_edits(root, f"Install {candidate.slug}")
        meta = read_meta(candidate.path.parent)
        installs: dict[str, Any] = (
            dict(meta.get("installs") or {}) if isinstance(meta.get("installs"), dict) else {}
        )
        installs.update({str(r.path): shown_digest for r in results})
        now = utc_now()
        meta.setdefault("name", candidate.slug)
        meta.setdefault("created_at", now)
        meta["installs"] = dict(sorted(installs.items()))
        meta["status"] = "installed"
        meta["installed_paths"] = sorted(installs)
        meta["content_hash"] = meta["installed_hash"] = digest
        meta["installed_at"] = meta["updated_at"] = now
        write_meta(candidate.path.parent, meta)
        commit_all(root, f"Install {candidate.slug} -> {len(results)} folder(s)")
    return results


def _shown(data: bytes) -> bytes:
    """The candidate as it may go to the agents' skills folders, where a model reads it (the exit
    door ``skills``): a secret typed into the candidate by hand, or drafted with redaction off,
    stays in the store, never in an installed copy. Bytes that are not UTF-8 survive unchanged."""
    from memsearch import exits

    text = data.decode("utf-8", errors="surrogateescape")
    return exits.out(text, "skills").encode("utf-8", errors="surrogateescape")


def _action(target: Path, data: bytes) -> str:
    """What installing ``data`` at ``target`` would do: ``created``, ``unchanged``, ``updated`` (a
    version memsearch itself wrote there, by its own record: :mod:`memsearch.engine.written`, never the
    store's meta.json) or ``foreign`` (anything else, a symbolic link included: ``--force`` only)."""
    try:
        st = target.lstat()
    except FileNotFoundError:
        return "created"
    if stat.S_ISDIR(st.st_mode):
        raise SkillExistsError(f"{target} exists and is not a file", "move it away, then install again")
    if not stat.S_ISREG(st.st_mode):
        return "foreign"
    current = read_project_bytes(target, target.parent)
    if current is None:
        return "foreign"
    if current == data:
        return "unchanged"
    return "updated" if content_hash(current) in written.recorded_install(target) else "foreign"


def _free_backup_name(target: Path) -> Path:
    """``SKILL.md.bak``, or ``SKILL.md.bak.<n>`` when earlier backups are there: a backup is never
    overwritten."""
    backup = target.with_name(SKILL_FILE + ".bak")
    n = 1
    while os.path.lexists(backup):
        backup = target.with_name(f"{SKILL_FILE}.bak.{n}")
        n += 1
    return backup


@dataclass(frozen=True)
class InstallState:
    """How one recorded install looks now: ``current`` (the installed version is there),
    ``missing`` (deleted), ``edited`` (changed since memsearch wrote it)."""

    path: str
    state: str


def install_states(candidate: Candidate) -> list[InstallState]:
    """Check each place the candidate was installed to (files only)."""
    out: list[InstallState] = []
    for path, digest in candidate.installs:
        data = read_project_bytes(Path(path), Path(path).parent)
        if data is None:
            out.append(InstallState(path, "missing"))
            continue
        out.append(InstallState(path, "current" if same_version(digest, data) else "edited"))
    return out
