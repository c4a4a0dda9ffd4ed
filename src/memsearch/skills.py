"""Skills from memory: the candidate store and installing candidates into the agents.

Recurring multi-step workflows found in the journals become *candidate* skills, one
``<memsearch_dir>/skill-candidates/<slug>/SKILL.md`` each (Agent Skills format: front matter with
``name`` and ``description``, then markdown). Candidates are drafts no agent reads; a person makes
one live with an explicit install, which copies its ``SKILL.md`` into a host's skills folder
(:data:`HOST_SKILL_DIRS`).

Why a git repository: the store is edited by a background task without anyone watching, so every
automatic change is one commit (``git log``/``git diff`` show what changed and why, ``git revert``
undoes it). Edits a person makes by hand are committed on their own before the next automatic
change, so an automatic rewrite can never silently lose them. Real ``git`` is run as a subprocess;
when it is missing, writing fails with :class:`~memsearch.errors.GitNotFoundError` (reading and the
session-start hint work without it).

Why ``meta.json`` beside each ``SKILL.md``: the front matter stays the two standard fields every
host understands, and the bookkeeping (when it was made, where and which version was installed)
lives apart from it. It keeps the original memsearch's keys and hash format (``gitblob:`` + git's
blob id of the SKILL.md bytes, what ``git hash-object`` prints), so either tool reads a store the
other wrote; ``installs`` (each destination with the version written there) is ours. A candidate
without ``meta.json`` (written by hand) is still a candidate.

Statuses (:attr:`Candidate.status`):

``pending``   never installed: waiting for review.
``installed`` the current version is what was last installed.
``changed``   installed once, but the candidate has changed since: an update waits for review.

Import cost: standard library only (the session-start hook calls :func:`candidates_hint`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.errors import (
    GitCommandError,
    GitNotFoundError,
    NoInstallTargetError,
    SkillExistsError,
    SkillInputError,
    SkillNotFoundError,
)

__all__ = [
    "CANDIDATES_DIRNAME",
    "HOST_SKILL_DIRS",
    "STATUSES",
    "Candidate",
    "InstallResult",
    "InstallState",
    "WriteResult",
    "candidates_hint",
    "candidates_root",
    "host_skill_dir",
    "install_candidate",
    "install_states",
    "list_candidates",
    "read_candidate",
    "render_skill_md",
    "slugify",
    "split_front_matter",
    "write_candidate",
]

CANDIDATES_DIRNAME = "skill-candidates"
SKILL_FILE = "SKILL.md"
META_FILE = "meta.json"
#: Statuses a candidate can have, in the order ``skills list`` explains them.
STATUSES = ("pending", "installed", "changed")
#: The Agent Skills limits on ``name`` and ``description`` (hosts reject longer ones).
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
#: Identity of the automatic commits, so ``git log`` tells them from a person's.
GIT_AUTHOR = ("memsearch", "memsearch@localhost")
#: Inherited git variables that would point git at another repository (e.g. inside a git hook).
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX")
_LOCK_NAME = ".skill-candidates.lock"

#: Where each host reads skills: platform -> (project-level folder relative to the project,
#: user-level folder). ``~`` and ``$VAR`` are expanded; see :func:`host_skill_dir` for the
#: environment variables each host honours.
HOST_SKILL_DIRS: dict[str, tuple[str, str]] = {
    "claude-code": (".claude/skills", "~/.claude/skills"),
    "codex": (".agents/skills", "~/.agents/skills"),
    "openclaw": ("skills", "~/.openclaw/skills"),
    "opencode": (".opencode/skills", "~/.config/opencode/skills"),
}


def candidates_root(memsearch_dir: Path) -> Path:
    """The candidate store: ``<memsearch_dir>/skill-candidates`` (named so nobody takes the drafts
    for live skills)."""
    return Path(memsearch_dir) / CANDIDATES_DIRNAME


@dataclass(frozen=True)
class Candidate:
    """One candidate skill, ``<root>/<slug>/SKILL.md`` (``path`` is that file)."""

    slug: str
    name: str
    description: str
    path: Path
    status: str
    #: ``gitblob:<git blob id>`` of the current SKILL.md bytes.
    content_hash: str = ""
    #: Hash of the version last installed ("" when never installed).
    installed_hash: str = ""
    #: Every SKILL.md this candidate was installed to, with the hash written there.
    installs: tuple[tuple[str, str], ...] = ()
    created_at: str = ""
    updated_at: str = ""
    #: How often the distiller saw the workflow, and the journals it saw it in (when it said so).
    occurrences: int | None = None
    sources: tuple[str, ...] = ()

    @property
    def installed_paths(self) -> list[str]:
        return [path for path, _ in self.installs]

    def body(self) -> str:
        """The markdown after the front matter (what a revision of the skill starts from)."""
        return split_front_matter(self.path.read_text(encoding="utf-8"))[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "status": self.status,
            "pending_install": self.status != "installed",
            "pending_reason": {"pending": "new", "changed": "updated"}.get(self.status),
            "occurrences": self.occurrences,
            "sources": list(self.sources),
            "content_hash": self.content_hash,
            "installed_hash": self.installed_hash,
            "installed_paths": self.installed_paths,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write_candidate` did: ``action`` is ``created``, ``updated`` or ``unchanged``."""

    slug: str
    action: str
    #: The commit that recorded the change ("" when unchanged).
    commit: str = ""


@dataclass(frozen=True)
class InstallResult:
    """One destination of an install: ``action`` is ``created``, ``updated``, ``unchanged`` or
    ``replaced`` (a file memsearch did not write, replaced with ``force``; the old one is kept as
    ``backup``)."""

    path: Path
    action: str
    backup: Path | None = None


# --- names and SKILL.md --------------------------------------------------------------------------


def slugify(name: str) -> str:
    """A valid Agent Skills name for ``name``: lowercase ASCII letters, digits and single hyphens,
    at most 64 characters. Accents are folded (``Café`` -> ``cafe``); a name with no ASCII letters
    or digits (e.g. Chinese) gets ``skill-`` plus a short hash of it, so two such names never
    collide."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    if not slug:
        digest = hashlib.sha256(name.strip().encode("utf-8")).hexdigest()[:8]
        return f"skill-{digest}"
    return slug[:MAX_NAME_CHARS].rstrip("-")


def _yaml_string(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar: safe for colons, quotes, '#', newlines.
    return json.dumps(text, ensure_ascii=False)


def render_skill_md(slug: str, description: str, body: str) -> str:
    """The SKILL.md text: the two standard front matter fields, then the body."""
    return f"---\nname: {slug}\ndescription: {_yaml_string(description)}\n---\n\n{body.strip()}\n"


def _parse_scalar(value: str) -> str:
    value = value.strip()
    if value.startswith('"'):
        with contextlib.suppress(json.JSONDecodeError):
            decoded = json.loads(value)
            if isinstance(decoded, str):
                return decoded
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``(fields, body)`` of a SKILL.md: the one-line ``key: value`` fields of its front matter
    (nested blocks are skipped) and the markdown after it. Text without front matter is all body."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text.strip()
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        return {}, text.strip()
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key and not key[0].isspace():
            fields[key.strip()] = _parse_scalar(value)
    return fields, "\n".join(lines[end + 1 :]).strip()


def _content_hash(data: bytes) -> str:
    """``gitblob:`` + the id git gives ``data`` as a blob (the original memsearch's format)."""
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    return f"gitblob:{blob}"


def _same_version(recorded: str, data: bytes) -> bool:
    """Whether ``data`` is the version a recorded hash names."""
    return bool(recorded) and recorded == _content_hash(data)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- reading the store ---------------------------------------------------------------------------


def _read_meta(skill_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((skill_dir / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _installs(meta: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    raw = meta.get("installs")
    if isinstance(raw, dict):
        return tuple(sorted((str(path), str(digest)) for path, digest in raw.items()))
    legacy = meta.get("installed_paths")  # the original's meta.json: paths, one hash for all
    if isinstance(legacy, list):
        digest = str(meta.get("installed_hash") or "")
        return tuple(sorted((str(path), digest) for path in legacy))
    return ()


def _status(meta: Mapping[str, Any], data: bytes) -> str:
    installed_hash = str(meta.get("installed_hash") or "")
    if installed_hash:
        return "installed" if _same_version(installed_hash, data) else "changed"
    # Installed by an older tool that kept no hash: which version is out there is unknown.
    if meta.get("status") == "installed" or meta.get("installed_paths"):
        return "changed"
    return "pending"


def _candidate(skill_dir: Path) -> Candidate | None:
    path = skill_dir / SKILL_FILE
    try:
        data = path.read_bytes()
    except OSError:
        return None
    fields, _body = split_front_matter(data.decode("utf-8", errors="replace"))
    meta = _read_meta(skill_dir)
    occurrences = meta.get("occurrences")
    sources = meta.get("sources")
    return Candidate(
        slug=skill_dir.name,
        name=fields.get("name") or skill_dir.name,
        description=fields.get("description", ""),
        path=path,
        status=_status(meta, data),
        content_hash=_content_hash(data),
        installed_hash=str(meta.get("installed_hash") or ""),
        installs=_installs(meta),
        created_at=str(meta.get("created_at") or ""),
        updated_at=str(meta.get("updated_at") or ""),
        occurrences=occurrences
        if isinstance(occurrences, int) and not isinstance(occurrences, bool)
        else None,
        sources=tuple(str(x) for x in sources) if isinstance(sources, list) else (),
    )


def list_candidates(memsearch_dir: Path) -> list[Candidate]:
    """Every candidate in the store, by slug; [] when there is no store. Files only (no git)."""
    root = candidates_root(memsearch_dir)
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [c for c in (_candidate(child) for child in children) if c is not None]


def read_candidate(memsearch_dir: Path, name: str) -> Candidate:
    """The candidate called ``name`` (a slug, or a name that slugifies to one)."""
    root = candidates_root(memsearch_dir)
    for slug in dict.fromkeys((name, slugify(name))):
        if "/" in slug or slug.startswith("."):
            continue
        found = _candidate(root / slug)
        if found is not None:
            return found
    known = [c.slug for c in list_candidates(memsearch_dir)]
    hint = f"known candidates: {', '.join(known)}" if known else "the store is empty"
    raise SkillNotFoundError(
        f"no candidate skill named {name!r} in {root}", f"{hint}; see `memsearch skills list`"
    )


def candidates_hint(memsearch_dir: Path) -> str:
    """One line for session start when candidates wait for review ("" when none). Never raises:
    a hint must not break a session."""
    try:
        waiting = [c for c in list_candidates(memsearch_dir) if c.status != "installed"]
    except Exception:  # a damaged store must not break session start
        return ""
    if not waiting:
        return ""
    # The original's wording, so anything that looks for it still finds it.
    return (
        f"SKILLS: {len(waiting)} candidate skill version(s) pending install - "
        "run the memory-to-skill skill to review and install."
    )


# --- git -----------------------------------------------------------------------------------------


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env.update(
        GIT_AUTHOR_NAME=GIT_AUTHOR[0],
        GIT_AUTHOR_EMAIL=GIT_AUTHOR[1],
        GIT_COMMITTER_NAME=GIT_AUTHOR[0],
        GIT_COMMITTER_EMAIL=GIT_AUTHOR[1],
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def _git(root: Path, *args: str) -> str:
    """Run one git command in the store; its stdout. Signing and hooks are off: an automatic
    commit must not wait for a passphrase or run the user's scripts."""
    exe = shutil.which("git")
    if exe is None:
        raise GitNotFoundError(
            "git is not installed (or not on PATH); the skill candidate store is a git repository",
            "install git (e.g. `apt install git` or `brew install git`) and run the command again",
        )
    cmd = [exe, "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args]
    try:
        proc = subprocess.run(
            cmd, cwd=root, env=_git_env(), capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitCommandError(f"git {args[0]} failed in {root}: {exc}") from None
    if proc.returncode != 0:
        detail = " ".join((proc.stderr or proc.stdout).split())[:300]
        raise GitCommandError(
            f"git {args[0]} failed in {root} (exit {proc.returncode}): {detail}",
            f"inspect the store with `git -C {root} status`",
        )
    return proc.stdout


def _ensure_repo(root: Path) -> None:
    if (root / ".git").exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "-c", "init.defaultBranch=main", "init", "-q")


def _commit_all(root: Path, message: str) -> str:
    """Stage everything and commit; the new commit's id, or "" when nothing changed."""
    _git(root, "add", "-A")
    if not _git(root, "status", "--porcelain"):
        return ""
    _git(root, "commit", "-q", "--no-verify", "-m", message)
    return _git(root, "rev-parse", "--short", "HEAD").strip()


def _keep_manual_edits(root: Path, before: str) -> None:
    """Commit whatever a person changed in the store by hand, before an automatic change, so the
    automatic one is its own commit and the hand edits are in history, never lost."""
    _commit_all(root, f"Keep manual edits (before: {before.splitlines()[0] if before else ''})")


@contextlib.contextmanager
def _store_lock(memsearch_dir: Path) -> Iterator[None]:
    """One writer at a time (two sessions may distil or install at once); git's own index lock
    would make the second fail instead of wait."""
    memsearch_dir.mkdir(parents=True, exist_ok=True)
    with open(memsearch_dir / _LOCK_NAME, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock, the git index lock still guards
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _write_text(path: Path, text: str) -> None:
    """Replace ``path`` in one step (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_meta(skill_dir: Path, meta: Mapping[str, Any]) -> None:
    _write_text(skill_dir / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


# --- writing -------------------------------------------------------------------------------------


def _clean_inputs(name: str, description: str, body: str) -> tuple[str, str, str]:
    description = " ".join(description.split())
    _fields, body = split_front_matter(body)  # a body that brings its own front matter loses it
    if not name.strip():
        raise SkillInputError("a skill needs a name", "pass --name, e.g. --name deploy-to-staging")
    if not description or not body:
        raise SkillInputError(
            "a skill needs both a description and a body",
            "describe what it does and when to use it, and give the steps as markdown",
        )
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillInputError(
            f"the description has {len(description)} characters; skills allow {MAX_DESCRIPTION_CHARS}",
            "shorten it to what the skill does and when to use it",
        )
    return slugify(name), description, body


def write_candidate(
    memsearch_dir: Path,
    name: str,
    description: str,
    body: str,
    *,
    message: str,
    occurrences: int | None = None,
    sources: Sequence[str] = (),
) -> WriteResult:
    """Create or update the candidate for ``name``: ``<slug>/SKILL.md`` with front matter, one git
    commit with ``message`` (the repository is made on first use). Identical content is
    ``unchanged`` and makes no commit. Hand edits in the store are committed first, on their own.
    ``occurrences``/``sources`` (what the distiller saw) go to ``meta.json``: the highest count
    seen, and every journal named so far."""
    slug, description, body = _clean_inputs(name, description, body)
    memsearch_dir = Path(memsearch_dir)
    root = candidates_root(memsearch_dir)
    text = render_skill_md(slug, description, body)
    with _store_lock(memsearch_dir):
        _ensure_repo(root)
        _keep_manual_edits(root, message)
        skill_dir = root / slug
        path = skill_dir / SKILL_FILE
        existed = path.is_file()
        if existed and path.read_bytes() == text.encode("utf-8"):
            return WriteResult(slug, "unchanged")
        meta = _read_meta(skill_dir)
        now = _now()
        meta.setdefault("name", slug)
        meta.setdefault("status", "candidate")
        meta.setdefault("installed_paths", [])
        meta.setdefault("created_at", now)
        meta["updated_at"] = now
        meta["description"] = description
        meta["content_hash"] = _content_hash(text.encode("utf-8"))
        if name.strip() != slug:
            meta.setdefault("title", name.strip())
        if occurrences is not None:
            meta["occurrences"] = max(occurrences, int(meta.get("occurrences") or 0))
        if sources:
            known = meta.get("sources")
            meta["sources"] = sorted({*(map(str, known) if isinstance(known, list) else ()), *sources})
        _write_text(path, text)
        _write_meta(skill_dir, meta)
        commit = _commit_all(root, message)
    return WriteResult(slug, "updated" if existed else "created", commit)


# --- installing ----------------------------------------------------------------------------------


def host_skill_dir(
    platform: str, project_dir: Path, *, user: bool = False, env: Mapping[str, str] | None = None
) -> Path:
    """The folder ``platform`` reads skills from: in the project, or for the user (all projects).
    Honoured: ``CLAUDE_CONFIG_DIR`` (Claude Code), ``OPENCLAW_STATE_DIR`` (OpenClaw),
    ``XDG_CONFIG_HOME`` (OpenCode)."""
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
    which keeps the old file as ``SKILL.md.bak``."""
    if not destinations:
        raise NoInstallTargetError(
            "no install destination given",
            "pass --platform (claude-code, codex, openclaw, opencode) or --path <skills folder>",
        )
    memsearch_dir = Path(memsearch_dir)
    root = candidates_root(memsearch_dir)
    with _store_lock(memsearch_dir):
        candidate = read_candidate(memsearch_dir, name)
        data = candidate.path.read_bytes()
        digest = _content_hash(data)
        recorded = dict(candidate.installs)
        targets = list(
            dict.fromkeys(Path(d).expanduser().absolute() / candidate.slug / SKILL_FILE for d in destinations)
        )
        plan: list[tuple[Path, str]] = []
        foreign: list[Path] = []
        for target in targets:
            if target.exists() and not target.is_file():
                raise SkillExistsError(
                    f"{target} exists and is not a file", "move it away, then install again"
                )
            try:
                current = target.read_bytes()
            except FileNotFoundError:
                plan.append((target, "created"))
                continue
            except OSError as exc:
                raise SkillExistsError(
                    f"cannot read {target}: {exc.strerror}", "check its permissions"
                ) from None
            if current == data:
                plan.append((target, "unchanged"))
            elif _same_version(recorded.get(str(target), ""), current):
                plan.append((target, "updated"))
            else:
                foreign.append(target)
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
                backup = target.with_name(SKILL_FILE + ".bak")
                os.replace(target, backup)
            if action != "unchanged":
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{SKILL_FILE}.{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, target)
            results.append(InstallResult(target, action, backup))
        _ensure_repo(root)
        _keep_manual_edits(root, f"Install {candidate.slug}")
        meta = _read_meta(candidate.path.parent)
        installs: dict[str, Any] = (
            dict(meta.get("installs") or {}) if isinstance(meta.get("installs"), dict) else {}
        )
        installs.update({str(r.path): digest for r in results})
        now = _now()
        meta.setdefault("name", candidate.slug)
        meta.setdefault("created_at", now)
        meta["installs"] = dict(sorted(installs.items()))
        meta["status"] = "installed"
        meta["installed_paths"] = sorted(installs)
        meta["content_hash"] = meta["installed_hash"] = digest
        meta["installed_at"] = meta["updated_at"] = now
        _write_meta(candidate.path.parent, meta)
        _commit_all(root, f"Install {candidate.slug} -> {len(results)} folder(s)")
    return results


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
        try:
            data = Path(path).read_bytes()
        except OSError:
            out.append(InstallState(path, "missing"))
            continue
        out.append(InstallState(path, "current" if _same_version(digest, data) else "edited"))
    return out
