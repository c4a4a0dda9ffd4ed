"""Writing a candidate: inputs checked, SKILL.md and meta.json written, one commit per change."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memsearch.errors import SkillInputError, SkillMetaError
from memsearch.skills.names import (
    MAX_DESCRIPTION_CHARS,
    SKILL_FILE,
    content_hash,
    render_skill_md,
    slugify,
    split_front_matter,
    utc_now,
)
from memsearch.skills.repo import (
    commit_all,
    ensure_repo,
    file_errors,
    keep_manual_edits,
    store_lock,
    write_meta,
    write_text,
)
from memsearch.skills.store import candidates_root, read_candidate, read_meta, read_skill_bytes


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write_candidate` did: ``action`` is ``created``, ``updated`` or ``unchanged``."""

    slug: str
    action: str
    #: The commit that recorded the change ("" when unchanged).
    commit: str = ""


def decode_body(data: bytes, source: str = "-") -> str:
    """A SKILL.md body read as bytes (a file, stdin) as text. A skill is read by agents as UTF-8,
    so other bytes are refused with :class:`~memsearch.errors.SkillInputError` (one ``Error:``
    line), never guessed at or replaced."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = "stdin" if source in ("-", "<stdin>") else source
        raise SkillInputError(
            f"the skill body from {where} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})",
            "save the body as UTF-8 (e.g. `iconv -t UTF-8`), then add it again",
        ) from None


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
    from memsearch import redact

    redactor = redact.current()  # a drafted skill is shared and installed: no secret goes in it
    description, body = redactor.text(description, "skills"), redactor.text(body, "skills")
    slug, description, body = _clean_inputs(name, description, body)
    memsearch_dir = Path(memsearch_dir)
    root = candidates_root(memsearch_dir)
    text = render_skill_md(slug, description, body)
    with file_errors(f"write the skill candidate {slug}"), store_lock(memsearch_dir):
        ensure_repo(root)
        keep_manual_edits(root, message)
        skill_dir = root / slug
        path = skill_dir / SKILL_FILE
        if os.path.islink(skill_dir) or os.path.islink(path):
            raise SkillMetaError(
                f"{skill_dir} holds a symbolic link where the store keeps a candidate; nothing was written",
                "remove the link (a store is never written through one), then run again",
            )
        current = read_skill_bytes(skill_dir)
        existed = current is not None
        if current == text.encode("utf-8"):
            return WriteResult(slug, "unchanged")
        meta = read_meta(skill_dir)
        now = utc_now()
        meta.setdefault("name", slug)
        meta.setdefault("status", "candidate")
        meta.setdefault("installed_paths", [])
        meta.setdefault("created_at", now)
        meta["updated_at"] = now
        meta["description"] = description
        meta["content_hash"] = content_hash(text.encode("utf-8"))
        if name.strip() != slug:
            meta.setdefault("title", name.strip())
        if occurrences is not None:
            meta["occurrences"] = max(occurrences, int(meta.get("occurrences") or 0))
        if sources:
            known = meta.get("sources")
            meta["sources"] = sorted({*(map(str, known) if isinstance(known, list) else ()), *sources})
        write_text(path, text)
        write_meta(skill_dir, meta)
        commit = commit_all(root, message)
    return WriteResult(slug, "updated" if existed else "created", commit)


def reject_candidate(memsearch_dir: Path, name: str) -> str:
    """Turn down the current version of candidate ``name``: it stops waiting for review (and the
    session-start hint stops counting it) until the distiller revises it. Recorded in its
    ``meta.json`` (``rejected_hash``: the version turned down), one commit, so ``git revert`` or
    installing it anyway undoes it. Returns the slug."""
    memsearch_dir = Path(memsearch_dir)
    root = candidates_root(memsearch_dir)
    with file_errors(f"reject the skill candidate {name}"), store_lock(memsearch_dir):
        candidate = read_candidate(memsearch_dir, name)
        ensure_repo(root)
        keep_manual_edits(root, f"Reject candidate {candidate.slug}")
        skill_dir = candidate.path.parent
        data = read_skill_bytes(skill_dir)
        if data is None:
            raise SkillMetaError(f"{candidate.path} is not a regular file of the store; nothing was rejected")
        meta = read_meta(skill_dir)
        meta["rejected_hash"] = content_hash(data)
        meta["rejected_at"] = utc_now()
        write_meta(skill_dir, meta)
        commit_all(root, f"Reject candidate {candidate.slug}")
    return candidate.slug
