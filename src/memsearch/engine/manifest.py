"""The index manifest: what one (store, collection) holds, per file, so an unchanged folder costs
no store and no model (``memsearch.engine.indexer`` explains the why).

A manifest is a small JSON file under ``<home>/manifests/``. It is an optimisation, never the
truth: it is written only over the file its run read (a ``reset`` or another run meanwhile leaves
it alone), and a manifest that does not match the store is discarded by the indexer.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsearch.files import atomic_write
from memsearch.scanner import ScannedFile

logger = logging.getLogger("memsearch.engine.indexer")

MANIFEST_VERSION = 1


@dataclass
class FileEntry:
    """A manifest row: the stat and content hash of a file as last indexed."""

    size: int
    mtime_ns: int
    sha256: str
    chunks: int = 0

    def same_stat(self, f: ScannedFile) -> bool:
        return self.size == f.size and self.mtime_ns == mtime_ns(f)


@dataclass
class Manifest:
    """The per-store record of what is indexed (see module docstring)."""

    path: Path | None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    files: dict[str, FileEntry] = field(default_factory=dict)
    #: The file as this run found it (inode, mtime): :meth:`save` writes only over that same file.
    seen: tuple[int, int] | None = None

    @classmethod
    def load(cls, path: Path | None, fingerprint: dict[str, Any]) -> Manifest:
        """Load the manifest; a missing, unreadable or differently-configured one starts empty.

        A file this process read or wrote last, unchanged since (same inode and modification
        time), is not parsed again (:data:`_KNOWN`)."""
        seen = _identity(path)
        known = _KNOWN.get(path) if path is not None and seen is not None else None
        if known is not None and known[0] == seen and known[1] == fingerprint:
            return cls(path, fingerprint, dict(known[2]), seen)
        manifest = cls._read(path, fingerprint)
        manifest.seen = seen
        manifest._remember()
        return manifest

    def _remember(self) -> None:
        if self.path is not None and self.seen is not None:
            _KNOWN[self.path] = (self.seen, dict(self.fingerprint), dict(self.files))

    @classmethod
    def _read(cls, path: Path | None, fingerprint: dict[str, Any]) -> Manifest:
        if path is None:
            return cls(None, fingerprint)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != MANIFEST_VERSION or data.get("fingerprint") != fingerprint:
                return cls(path, fingerprint)
            files = {p: FileEntry(**e) for p, e in data.get("files", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return cls(path, fingerprint)
        return cls(path, fingerprint, files)

    def save(self) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a manifest; but not
        over a manifest that changed since this run read it: a ``reset`` (which deletes it) or
        another run through another memory of the store happened meanwhile, and this run's view
        may claim chunks the store no longer has. The next run then checks against the store."""
        if self.path is None:
            return
        if _identity(self.path) != self.seen:
            logger.debug("index manifest %s changed during this run; not overwriting it", self.path)
            return
        data = {
            "version": MANIFEST_VERSION,
            "fingerprint": self.fingerprint,
            "files": {p: vars(e) for p, e in sorted(self.files.items())},
        }
        try:
            atomic_write(self.path, json.dumps(data, separators=(",", ":")))
        except OSError as exc:  # the manifest is an optimisation; never fail indexing for it
            logger.warning("could not write index manifest %s: %s", self.path, exc)
        self.seen = _identity(self.path)
        self._remember()


#: Per manifest file, the last version this process read or wrote: (its identity, the fingerprint,
#: its entries). Why: the memory service indexes the same folders again and again (every hook
#: capture), and parsing a manifest of 10,000 files took ~40 ms of each one-file change; a file
#: changed by another process has another identity and is read again. Entries are never changed
#: in place (a run replaces them), so the copies share them.
_KNOWN: dict[Path, tuple[tuple[int, int], dict[str, Any], dict[str, FileEntry]]] = {}


def _identity(path: Path | None) -> tuple[int, int] | None:
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if st is not None else None


def manifest_path(home: Path, uri: str, collection: str) -> Path:
    """Where the manifest of one (store, collection) lives under the memsearch home."""
    key = hashlib.sha256(f"{uri}\0{collection}".encode()).hexdigest()[:16]
    return home / "manifests" / f"{key}.json"


def mtime_ns(f: ScannedFile) -> int:
    ns = getattr(f, "mtime_ns", None)
    return int(ns) if ns is not None else int(f.mtime * 1e9)


def entry_matches(manifest: Manifest, f: ScannedFile) -> bool:
    entry = manifest.files.get(str(f.path))
    return entry is not None and entry.same_stat(f)
