"""Reading the candidate store: a candidate's SKILL.md and meta.json, its status, the listing and
the session-start hint. Files only (no git)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.engine.project_files import read_project_bytes, warn
from memsearch.errors import SkillMetaError, SkillNotFoundError
from memsearch.skills.names import (
    CANDIDATES_DIRNAME,
    META_FILE,
    SKILL_FILE,
    content_hash,
    same_version,
    slugify,
    split_front_matter,
)

#: Statuses a candidate can have, in the order ``skills list`` explains them.
STATUSES = ("pending", "installed", "changed", "rejected")
#: The statuses that wait for a person's review (the session-start hint counts them).
WAITING = ("pending", "changed")


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
        data = read_skill_bytes(self.path.parent)
        if data is None:
            raise OSError(f"{self.path} is no longer a regular file of the store")
        return split_front_matter(data.decode("utf-8", errors="replace"))[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "description": self.description,
            "path": str(self.path),
            "status": self.status,
            "pending_install": self.status in WAITING,
            "pending_reason": {"pending": "new", "changed": "updated"}.get(self.status),
            "occurrences": self.occurrences,
            "sources": list(self.sources),
            "content_hash": self.content_hash,
            "installed_hash": self.installed_hash,
            "installed_paths": self.installed_paths,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


_DIGEST = re.compile(r"gitblob:[0-9a-f]{40}")
#: meta.json fields memsearch reads, and the type each must have.
_META_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "title": str,
    "description": str,
    "status": str,
    "created_at": str,
    "updated_at": str,
    "installed_at": str,
    "content_hash": str,
    "installed_hash": str,
    "rejected_hash": str,
    "rejected_at": str,
    "occurrences": (int, type(None)),
    "sources": list,
    "installs": dict,
    "installed_paths": list,
}


def _bad_meta(skill_dir: Path, why: str) -> SkillMetaError:
    return SkillMetaError(
        f"{skill_dir / META_FILE} is not a meta.json memsearch writes: {why}; the candidate was not used",
        "delete that meta.json (the candidate's SKILL.md is kept) or the whole candidate folder",
    )


def _check_install_path(skill_dir: Path, path: Any) -> str:
    """An install path as memsearch records it: absolute, no ``..``, ``<folder>/<slug>/SKILL.md``."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise _bad_meta(skill_dir, "an install path is not a string")
    parts = Path(path).parts
    if not Path(path).is_absolute() or ".." in parts or parts[-2:] != (skill_dir.name, SKILL_FILE):
        raise _bad_meta(skill_dir, f"{path!r} is not a {skill_dir.name}/{SKILL_FILE} in a skills folder")
    return path


def parse_meta(skill_dir: Path, data: bytes) -> dict[str, Any]:
    """A candidate's ``meta.json`` checked field by field (types, hashes, install paths that name
    this skill's SKILL.md in some folder), or :class:`~memsearch.errors.SkillMetaError`. The store
    may have come with a cloned repository, so nothing in it is taken on trust."""
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad_meta(skill_dir, f"not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _bad_meta(skill_dir, "not a JSON object")
    for key, kind in _META_TYPES.items():
        if key in meta and (not isinstance(meta[key], kind) or isinstance(meta[key], bool)):
            raise _bad_meta(skill_dir, f'"{key}" has the wrong type')
    for key in ("content_hash", "installed_hash", "rejected_hash"):
        if meta.get(key) and not _DIGEST.fullmatch(meta[key]):
            raise _bad_meta(skill_dir, f'"{key}" is not a gitblob hash')
    for path, digest in (meta.get("installs") or {}).items():
        _check_install_path(skill_dir, path)
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise _bad_meta(skill_dir, f"the hash recorded for {path!r} is not a gitblob hash")
    for path in meta.get("installed_paths") or []:
        _check_install_path(skill_dir, path)
    if not all(isinstance(x, str) for x in meta.get("sources") or []):
        raise _bad_meta(skill_dir, '"sources" holds something other than names')
    return meta


def read_meta(skill_dir: Path) -> dict[str, Any]:
    """The candidate's checked ``meta.json`` ({} when there is none); a damaged or foreign one is
    :class:`~memsearch.errors.SkillMetaError`."""
    root = skill_dir.parent
    if os.path.lexists(skill_dir / META_FILE):
        data = read_project_bytes(skill_dir / META_FILE, root)
        if data is None:
            raise _bad_meta(skill_dir, "not a regular file of the store, or too large")
        return parse_meta(skill_dir, data)
    return {}


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
    if installed_hash and same_version(installed_hash, data):
        return "installed"
    rejected_hash = str(meta.get("rejected_hash") or "")
    if rejected_hash and same_version(rejected_hash, data):
        return "rejected"  # this version was turned down; a revised one waits for review again
    if installed_hash:
        return "changed"
    # Installed by an older tool that kept no hash: which version is out there is unknown.
    if meta.get("status") == "installed" or meta.get("installed_paths"):
        return "changed"
    return "pending"


def read_skill_bytes(skill_dir: Path) -> bytes | None:
    """A candidate's SKILL.md when it is a regular file in a real folder of the store (not a
    symbolic link to one elsewhere); None otherwise (:mod:`memsearch.engine.project_files`)."""
    root = skill_dir.parent
    if os.path.islink(skill_dir):
        if os.path.lexists(skill_dir / SKILL_FILE):
            warn(skill_dir, "a symbolic link (candidates are read only from folders of the store)")
        return None
    return read_project_bytes(skill_dir / SKILL_FILE, root)


def _candidate(skill_dir: Path) -> Candidate | None:
    path = skill_dir / SKILL_FILE
    data = read_skill_bytes(skill_dir)
    if data is None:
        return None
    fields, _body = split_front_matter(data.decode("utf-8", errors="replace"))
    meta = read_meta(skill_dir)
    occurrences = meta.get("occurrences")
    sources = meta.get("sources")
    return Candidate(
        slug=skill_dir.name,
        name=fields.get("name") or skill_dir.name,
        description=fields.get("description", ""),
        path=path,
        status=_status(meta, data),
        content_hash=content_hash(data),
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
    """Every usable candidate in the store, by slug; [] when there is no store. Files only (no
    git). A candidate whose folder is a symbolic link or whose meta.json is not memsearch's is
    left out with a warning line (the others are listed)."""
    root = candidates_root(memsearch_dir)
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    found = []
    for child in children:
        try:
            candidate = _candidate(child)
        except SkillMetaError as exc:
            warn(child, exc.message)
            continue
        if candidate is not None:
            found.append(candidate)
    return found


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
        waiting = [c for c in list_candidates(memsearch_dir) if c.status in WAITING]
    except Exception:  # a damaged store must not break session start
        return ""
    if not waiting:
        return ""
    # The original's wording, so anything that looks for it still finds it.
    return (
        f"SKILLS: {len(waiting)} candidate skill version(s) pending install - "
        "run the memory-to-skill skill to review and install."
    )
