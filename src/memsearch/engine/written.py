"""memsearch's own record of what it wrote, for the facts a project's files cannot vouch for.

A journal or a ``meta.json`` in a cloned repository says whatever its author wrote. Two of its
claims decide what memsearch does with the user's own files, so memsearch keeps its own record of
them, under ``~/.memsearch/written/`` (a private 0700 folder; nothing in a project can write there):

- the conversation files its journal anchors name, per memory folder: a maintenance model may look
  up only those (an anchor-shaped comment in a shipped journal can name any file on the disk);
- the SKILL.md files it installed and which version: ``skills install`` replaces only those
  without ``--force`` (a shipped ``meta.json`` can claim any skill of the user's as its own);
- the memory folders its journal writer wrote into (every host's capture, the MCP ``remember``
  tool): the projects on this machine, which ``memsearch ui --all`` shows.

Each record is a text file, one entry a line, appended under a lock. Losing it costs convenience
only: a lookup is refused, an update needs ``--force`` (and then keeps a backup).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from memsearch.files import exclusive, replaced

__all__ = [
    "forget_transcripts",
    "memory_folders",
    "record_install",
    "record_memory_folder",
    "record_transcripts",
    "recorded_install",
    "recorded_transcripts",
]

#: The most bytes read from one record (far beyond years of anchors).
_MAX_RECORD_BYTES = 16 * 1024 * 1024
_INSTALLS = "skill-installs.txt"
_MEMORY_FOLDERS = "memory-folders.txt"


def _folder() -> Path:
    from memsearch.config.files import memsearch_home

    return memsearch_home() / "written"


def _private_folder() -> Path:
    """The record's folder, created private (``memsearch.private``: 0700, ours, not a link)."""
    from memsearch import private

    return private.home_dir("written")


def _key(path: Path) -> str:
    return hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape")).hexdigest()[:24]


def _transcripts_file(memory_dir: Path) -> Path:
    return _folder() / f"transcripts-{_key(memory_dir)}.txt"


def _read_lines(path: Path) -> list[str]:
    """The record's lines; none when it is missing or not a regular file of ours (a record
    another user planted vouches for nothing)."""
    from memsearch import private

    try:
        data = private.read_private(path, limit=_MAX_RECORD_BYTES)
    except OSError:
        return []
    return data.decode("utf-8", errors="surrogateescape").splitlines()


def _append(path: Path, lines: list[str]) -> None:
    """Append the ``lines`` not yet in the record ``path`` (created private), under its lock."""
    _private_folder()
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "r+b") as fh, exclusive(fh):
            if replaced(path, fh.fileno()):
                continue  # rewritten by forget_transcripts while we waited: append to the new one
            fh.seek(0)
            have = set(fh.read(_MAX_RECORD_BYTES).decode("utf-8", errors="surrogateescape").splitlines())
            new = [line for line in dict.fromkeys(lines) if line not in have]
            if new:
                fh.write(("\n".join(new) + "\n").encode("utf-8", errors="surrogateescape"))
            return


def _remove(path: Path, lines: set[str]) -> None:
    """Rewrite the record ``path`` without ``lines``, under its lock (a temp file renamed over it,
    so a crash leaves the old record or the new one)."""
    from memsearch.files import atomic_write

    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        with os.fdopen(fd, "r+b") as fh, exclusive(fh):
            if replaced(path, fh.fileno()):
                continue
            have = fh.read(_MAX_RECORD_BYTES).decode("utf-8", errors="surrogateescape").splitlines()
            kept = [line for line in have if line not in lines]
            if len(kept) != len(have):
                data = "".join(f"{line}\n" for line in kept)
                atomic_write(path, data.encode("utf-8", errors="surrogateescape"), private=True, fsync=True)
            return


def _clean(path: str) -> str:
    return path if path and "\n" not in path and "\r" not in path and "\t" not in path else ""


def _resolved(path: str) -> str:
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        return _clean(os.path.realpath(os.path.expanduser(path)))
    return ""


def record_transcripts(memory_dir: Path, paths: list[str]) -> None:
    """Remember that memsearch named the conversation files ``paths`` in ``memory_dir``'s journals.
    Never raises: a journal entry must not fail for its bookkeeping."""
    kept = [p for p in (_resolved(p) for p in paths if p) if p]
    if kept:
        with contextlib.suppress(OSError):
            _append(_transcripts_file(memory_dir), kept)


def forget_transcripts(memory_dir: Path, paths: list[str]) -> None:
    """Unrecord the conversation files ``paths`` for ``memory_dir`` (``memsearch forget``: no entry
    names them any more, so no maintenance model may look them up). Never raises."""
    gone = {p for p in (_resolved(p) for p in paths if p) if p}
    if gone:
        with contextlib.suppress(OSError):
            _remove(_transcripts_file(memory_dir), gone)


def recorded_transcripts(memory_dir: Path) -> frozenset[str]:
    """Resolved paths of the conversation files memsearch's own anchors named in ``memory_dir``."""
    return frozenset(_read_lines(_transcripts_file(memory_dir)))


def record_install(target: Path, digest: str) -> None:
    """Remember that memsearch wrote version ``digest`` to the SKILL.md ``target``."""
    path = _clean(os.path.abspath(target))
    if path and digest and "\t" not in digest:
        _append(_folder() / _INSTALLS, [f"{digest}\t{path}"])


def recorded_install(target: Path) -> frozenset[str]:
    """Every version memsearch itself wrote to the SKILL.md ``target`` (empty when none)."""
    path = os.path.abspath(target)
    found = set()
    for line in _read_lines(_folder() / _INSTALLS):
        digest, _, where = line.partition("\t")
        if where == path:
            found.add(digest)
    return frozenset(found)


def record_memory_folder(memory_dir: Path) -> None:
    """Remember that memsearch wrote a journal into ``memory_dir``. Never raises."""
    path = _resolved(str(memory_dir))
    if path:
        with contextlib.suppress(OSError):
            _append(_folder() / _MEMORY_FOLDERS, [path])


def memory_folders() -> list[Path]:
    """The memory folders memsearch wrote journals into that still exist, in the order first
    written."""
    return [Path(line) for line in _read_lines(_folder() / _MEMORY_FOLDERS) if os.path.isdir(line)]
