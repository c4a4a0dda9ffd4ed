"""Reading the candidate store: a candidate's SKILL.md and meta.json, its status, the listing and
the session-start hint. Files only (no git)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.errors import (
    SkillNotFoundError,
)
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
STATUSES = ("pending", "installed", "changed")


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


def read_meta(skill_dir: Path) -> dict[str, Any]:
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
        return "installed" if same_version(installed_hash, data) else "changed"
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
