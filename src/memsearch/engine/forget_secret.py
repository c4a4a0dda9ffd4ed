"""``memsearch forget --secret``: a leaked value out of every file memsearch reads or keeps, in one step.

Why: a key pasted into a session ends up in more places than one journal entry: other entries, a
hand-written note, the recall log (a search for it), a log line, the index and its cache, a backup.
Forgetting sessions one by one misses some, and ``scan`` finds only values with a known shape. So
this takes the value itself and replaces every occurrence with :data:`LABEL`, in:

- markdown (journals and notes) under the project's ``.memsearch`` folder, the ``--memory-dir``
  folders, the folders of every file the store indexed, and every file whose chunks hold it;
- memsearch's own files under ``~/.memsearch`` and the project's ``.memsearch`` (the recall log,
  logs, state files): overwritten in place with ``*`` of the same length, since a process may
  hold them open for appending (:mod:`memsearch.engine.edits`);
- kept originals (:mod:`memsearch.engine.backups`): the places become holes only the value fills;
- then, through :mod:`memsearch.engine.forget_apply`: the changed notes kept without the value
  (``forget --undo ID --secret -`` puts it back), the index (changed files reindexed, rows of files
  that no longer hold it indexed again or removed), the embedding cache entries of every chunk text
  that held it, and the store's files rewritten without the deleted rows.

The value is looked for as written and as it reads inside a JSON string. Not searched: the agent
hosts' own transcripts, git history (``.git`` folders are skipped), other stores and collections,
the embedding model and jieba caches (no memory text), the embedding cache file (hashes and
vectors only), your settings (``~/.memsearch/config.toml``, the MCP token: a key kept there on
purpose stays; rotate it). The intent record holds positions and hashes, never the value; a kill -9 at any
point leaves the value everywhere or, after the next ``forget``/``index``/``scan``, nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.backups import KeptFile, forms, verifier
from memsearch.engine.edits import plan_spans, transform
from memsearch.engine.forget_apply import (
    Change,
    Intent,
    Outcome,
    cache_keys,
    texts_gone,
)
from memsearch.engine.journal import is_journal

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

__all__ = ["LABEL", "MIN_CHARS", "Found", "Place", "check_value", "find", "forget_secret"]

#: What an occurrence of the value becomes in markdown.
LABEL = "[REDACTED:forgotten]"
#: The shortest value accepted: shorter ones occur in ordinary text by chance.
MIN_CHARS = 6
#: Files larger than this are not read (memsearch writes none; a log rotates far below it).
MAX_BYTES = 64 << 20
#: Folders under ``~/.memsearch`` that hold no memory text (models, dictionaries).
_NO_TEXT = frozenset({"onnx-optimized", "cache"})
_MARKDOWN = (".md", ".markdown")
#: Files in ``~/.memsearch`` that are your settings, not memory: never changed.
_SETTINGS = frozenset({"config.toml", "mcp-token"})


def check_value(value: str) -> None:
    """Refuse a value that cannot be forgotten safely (ForgetTargetError)."""
    from memsearch.errors import ForgetTargetError

    if len(value.strip()) < MIN_CHARS:
        raise ForgetTargetError(
            f"the --secret value is shorter than {MIN_CHARS} characters",
            hint="give the whole value: a short one also occurs in ordinary text",
        )
    if any(f in LABEL.encode() for f in forms(value)):
        raise ForgetTargetError("the --secret value is part of the label it would be replaced with", hint="")


@dataclass(frozen=True)
class Place:
    """A file that holds the value: its kind (``journal``, ``note``, ``log``, ``backup``) and how
    many times."""

    path: Path
    kind: str
    count: int


@dataclass
class Found:
    """Where the value is: the files, and the index rows whose text holds it."""

    places: list[Place] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def sources(self) -> set[str]:
        return {str(r["source"]) for r in self.rows}


def spans_of(raw: bytes, value: str) -> list[tuple[int, int, int]]:
    """The occurrences of ``value``'s forms in ``raw``: ``(start, end, form index)``, in order, not
    overlapping (the longer form wins where two start together)."""
    hits = []
    seen: set[bytes] = set()
    for index, form in enumerate(forms(value)):
        if form in seen:
            continue
        seen.add(form)
        at = raw.find(form)
        while at >= 0:
            hits.append((at, at + len(form), index))
            at = raw.find(form, at + 1)
    hits.sort(key=lambda h: (h[0], h[0] - h[1]))
    chosen: list[tuple[int, int, int]] = []
    for hit in hits:
        if not chosen or hit[0] >= chosen[-1][1]:
            chosen.append(hit)
    return chosen


def _kind(path: Path, home: Path) -> str:
    if path.suffix in _MARKDOWN:
        return "journal" if is_journal(path) else "note"
    if path.suffix == ".blob" and path.parent.parent == home / "backups":
        return "backup"
    return "log"


def _skipped(path: Path, home: Path) -> bool:
    """Files never searched: memsearch's caches of no text, lock files, a backup's own records, and
    your settings (``config.toml``, the MCP token), where a key is meant to be."""
    name = path.name
    if name.startswith("embedding-cache.sqlite") or name.endswith(".lock") or name == "LOCK":
        return True
    if path.parent == home and name in _SETTINGS:
        return True
    return path.parent.parent == home / "backups" and path.suffix != ".blob"


def _walk(root: Path, *, deep: bool = True) -> Iterable[Path]:
    """Regular files under ``root`` (never through a link), without ``.git`` folders, Milvus Lite
    stores (their files are rewritten by the store: ``Memory.purge``) or folders of no text."""
    if not root.is_dir() or root.is_symlink():
        return
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if deep
            and d != ".git"
            and d not in _NO_TEXT
            and not (here / d / "collections").is_dir()  # a Milvus Lite database
        ]
        for name in names:
            path = here / name
            with contextlib.suppress(OSError):
                st = path.lstat()
                if path.is_file() and not path.is_symlink() and st.st_size <= MAX_BYTES:
                    yield path


def _indexed_files(cfg: MemSearchConfig) -> list[Path]:
    from memsearch import private
    from memsearch.engine.manifest import manifest_path
    from memsearch.store.uri import resolve_uri

    path = manifest_path(private.home(), resolve_uri(cfg.milvus.uri).uri, cfg.milvus.collection)
    try:
        return [Path(p) for p in json.loads(path.read_text(encoding="utf-8"))["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _candidates(cfg: MemSearchConfig, roots: Sequence[Path], sources: Iterable[str]) -> dict[Path, str]:
    """Every file to look in, with its kind (see the module docstring)."""
    from memsearch.config import memsearch_home

    home = memsearch_home().resolve()
    found: dict[Path, str] = {}
    for root in [*roots, home]:
        for path in _walk(root.resolve()):
            if not _skipped(path, home):
                found[path] = _kind(path, home)
    folders = {p.parent for p in _indexed_files(cfg)} | {Path(s).parent for s in sources}
    for folder in folders:
        for path in _walk(folder, deep=False):
            if path.suffix in _MARKDOWN:
                found.setdefault(path, _kind(path, home))
    for source in sources:
        path = Path(source)
        if path.is_file() and not path.is_symlink():
            found.setdefault(path, _kind(path, home))
    return found


def _read(path: Path) -> bytes | None:
    from memsearch.files import open_own

    try:
        with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh:
            return fh.read(MAX_BYTES + 1)
    except OSError:
        return None


def _body_start(raw: bytes) -> int:
    """Where a backup blob's body starts (after its header line)."""
    return raw.index(b"\n") + 1 if b"\n" in raw else len(raw)


def _count(raw: bytes, kind: str, value: str) -> int:
    return len(spans_of(raw[_body_start(raw) :] if kind == "backup" else raw, value))


def _holds(text: str, value: str) -> bool:
    return any(f.decode("utf-8", errors="surrogateescape") in text for f in forms(value))


def find(value: str, cfg: MemSearchConfig, memory: Memory, roots: Sequence[Path]) -> Found:
    """Where ``value`` is now (what the confirmation lists; nothing is changed or locked)."""
    rows = memory.query_chunks() if memory.count() else []  # (a store never indexed stays uncreated)
    found = Found(rows=[r for r in rows if _holds(str(r.get("content", "")), value)])
    for path, kind in sorted(_candidates(cfg, roots, found.sources).items()):
        raw = _read(path)
        count = _count(raw, kind, value) if raw else 0
        if count:
            found.places.append(Place(path, kind, count))
    return found


def _labelled(spans: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Where the label lands in the new text for each span: ``(start, end, form)``."""
    placed, shift = [], 0
    for start, end, form in spans:
        placed.append((start + shift, start + shift + len(LABEL.encode()), form))
        shift += len(LABEL.encode()) - (end - start)
    return placed


def forget_secret(
    value: str, cfg: MemSearchConfig, memory: Memory, roots: Sequence[Path], redactor: Redactor
) -> Outcome:
    """Replace every occurrence of ``value`` (module docstring), all or nothing; hand-written notes
    are kept first, without the value. NothingToForgetError when it is nowhere."""
    from memsearch.errors import ForgetConflictError, NothingToForgetError
    from memsearch.files import locked

    check_value(value)
    found = find(value, cfg, memory, roots)
    change = Change(Intent(os.urandom(8).hex(), []), what="forget --secret")
    keys = {str(r["content"]) for r in found.rows}
    check = {**verifier(value), "label": LABEL}
    edited: set[str] = set()
    with contextlib.ExitStack() as stack:
        for place in found.places:
            fh = stack.enter_context(locked(place.path))
            if fh is None:
                continue
            fh.seek(0)
            raw = fh.read()
            skip = _body_start(raw) if place.kind == "backup" else 0
            spans = spans_of(raw[skip:], value)
            if not spans:
                continue
            if place.kind == "backup":
                edit = plan_spans(place.path, raw, [(s, e, str(f)) for s, e, f in spans], "backup", check)
            else:
                label = "" if place.kind == "log" else LABEL
                edit = plan_spans(place.path, raw, [(s, e, label) for s, e, _ in spans], place.kind)
            new = transform(edit, raw) or b""
            if spans_of(new[_body_start(new) :] if place.kind == "backup" else new, value):
                raise ForgetConflictError(
                    f"{place.path}: the value overlaps the label it is replaced with (nothing was forgotten)",
                    hint="forget a longer part of it",
                )
            change.held.append((edit, fh))
            change.intent.files.append(edit)
            if edit.markdown:
                edited.add(str(place.path))
                gone, indexed = texts_gone(memory, place.path, raw, new, cfg, redactor)
                keys |= gone
                if place.kind == "note":
                    holes = _labelled(spans)
                    change.kept.append(KeptFile(place.path, new, new, indexed, holes, value))
        change.intent.reindex = sorted(found.sources - edited)
        if not change.intent.files and not change.intent.reindex:
            raise NothingToForgetError(
                "the value is in no memory file, log or index row: nothing was forgotten",
                hint="check the value (it is matched exactly, case included)",
            )
        change.intent.cache_keys = sorted(cache_keys(memory, keys))
        change.commit()
    return change.finish(cfg)
