"""The index manifest: what one (store, collection) holds, per file, so an unchanged folder costs
no store and no model (``memsearch.engine.indexer`` explains the why).

A manifest is a small JSON file under ``<home>/manifests/``. It is an optimisation, never the
truth: a run writes the files it recorded or dropped into it, merged with what other runs of the
store saved meanwhile (a ``reset`` meanwhile, which deletes it, is left alone), and a manifest
that does not match the store is discarded by the indexer.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memsearch.files import atomic_write, lock_file
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
    #: ``files`` as this run read them: what it changed since is what :meth:`save` merges.
    read: dict[str, FileEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None, fingerprint: dict[str, Any]) -> Manifest:
        """Load the manifest; a missing, unreadable or differently-configured one starts empty."""
        files = _read_files(path, fingerprint) or {}
        return cls(path, fingerprint, files, _identity(path), {p: replace(e) for p, e in files.items()})

    def save(self) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a manifest.

        Several runs may work on one store at once (a program, ``index``, a ``watch``'s updates, the
        MCP server, each through the store's owner): a manifest another run saved since this one
        read it gets this run's changes (the files it recorded or dropped) merged in, under a lock,
        rather than being left alone. Leaving it lost every file this run indexed, and a folder
        moved away later kept its chunks: pruning goes by the manifest, so only ``index --force``
        found them (issue 38). A manifest deleted meanwhile (a ``reset``) or written with other
        chunking settings is not touched: this run's view may claim chunks the store no longer has,
        and the next run checks against the store."""
        if self.path is None:
            return
        try:
            with lock_file(self.path.with_name(self.path.name + ".lock")):
                files = self._merged()
                if files is None:
                    logger.debug("index manifest %s was reset during this run; not writing it", self.path)
                    return
                data = {
                    "version": MANIFEST_VERSION,
                    "fingerprint": self.fingerprint,
                    "files": {p: vars(e) for p, e in sorted(files.items())},
                }
                atomic_write(self.path, json.dumps(data, separators=(",", ":")))
        except OSError as exc:  # the manifest is an optimisation; never fail indexing for it
            logger.warning("could not write index manifest %s: %s", self.path, exc)
            return
        self.files, self.seen = files, _identity(self.path)
        self.read = {p: replace(e) for p, e in files.items()}

    def _merged(self) -> dict[str, FileEntry] | None:
        """The files to write: this run's, or, when another run saved since this one read the
        manifest, that run's with this run's changes applied; None when it must not be written."""
        now = _identity(self.path)
        if now == self.seen:
            return dict(self.files)
        if now is None:  # deleted since: a reset
            return None
        current = _read_files(self.path, self.fingerprint)
        if current is None:  # other chunking settings (or unreadable): theirs, not ours to merge
            return None
        for source in self.read.keys() | self.files.keys():
            mine = self.files.get(source)
            if mine == self.read.get(source):
                continue
            if mine is None:
                current.pop(source, None)
            else:
                current[source] = mine
        return current


def _read_files(path: Path | None, fingerprint: dict[str, Any]) -> dict[str, FileEntry] | None:
    """The files of the manifest at ``path``; None when there is none, or it is unreadable or of
    another version or fingerprint."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != MANIFEST_VERSION or data.get("fingerprint") != fingerprint:
            return None
        return {p: FileEntry(**e) for p, e in data.get("files", {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return None


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
