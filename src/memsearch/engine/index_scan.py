"""An ``index`` run's first steps: scan the paths, compare them with the manifest, and read and
chunk the files whose bytes changed (``memsearch.engine.indexer`` runs them in that order).

Nothing here opens the store or loads the model: an unchanged folder is answered from these steps
alone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.chunker import Chunk, chunk_markdown
from memsearch.engine.manifest import FileEntry, Manifest, entry_matches, mtime_ns
from memsearch.errors import MemSearchError, PathNotFoundError
from memsearch.index_report import IndexFailure, format_error
from memsearch.scanner import ScannedFile, decode_markdown, read_markdown_bytes, scan

if TYPE_CHECKING:
    from memsearch.engine.indexer import IndexSettings

#: The text to chunk from a file's decoded text (its private spans and secrets left out), or None
#: to leave the file out; it may append warnings.
PrivateText = Callable[[str, Path, list[str]], "str | None"]


def unnamable(source: str) -> str | None:
    """Why the store could not name ``source`` in a filter, or None. Checked per file, so one such
    name (a control character) is skipped with a warning and never stops the files beside it."""
    from memsearch.store.filters import filter_problem

    problem = filter_problem(source)
    return f"its path {problem}, which the index cannot look up; rename the file" if problem else None


#: What a file name that is not valid UTF-8 holds once stored (``store.rows``): such a path names
#: no file, so that it is not found says nothing about whether the file is gone.
REPLACED = "\ufffd"


def gone_path(source: str) -> str | None:
    """The outermost path that no longer exists at or above the indexed file ``source``: the folder
    that was moved or deleted with it, or the file itself. ``memsearch index`` of it removes what
    the index holds there, so every hint about a gone file names it. None when ``source`` exists,
    or when that path holds :data:`REPLACED` (the file may well be there under its real name)."""
    path = Path(source).expanduser().absolute()
    if os.path.lexists(path):
        return None
    while path.parent != path and not os.path.lexists(path.parent):
        path = path.parent
    return None if REPLACED in str(path) else str(path)


def prune_command(gone: Sequence[str]) -> str:
    """``memsearch index <paths>``, the command that removes what the index holds at or under the
    ``gone`` paths (:func:`gone_path`)."""
    import shlex

    return "memsearch index " + " ".join(shlex.quote(path) for path in sorted(set(gone)))


def gone_hint(source: str) -> str:
    """What to do about the indexed file ``source`` that cannot be found (``expand``, ``forget``)."""
    gone = gone_path(source)
    if gone is None:
        return (
            "its name was stored with characters replaced (it is not valid UTF-8), so it cannot be "
            "read back; rename the file and run `memsearch index` on its folder"
        )
    return (
        f"the file was moved or deleted: `{prune_command([gone])}` removes its chunks from the index "
        "(then index where it went)"
    )


def under(source: str, roots: Sequence[Path]) -> bool:
    """True when ``source`` lies inside one of the directory ``roots`` (path-boundary check)."""
    p = Path(source)
    for root in roots:
        try:
            p.relative_to(root)
        except ValueError:
            continue
        return True
    return False


@dataclass
class Scanned:
    """The markdown files under the settings' paths, what could not be looked at, the directory
    roots (a source under one of them that is no longer found was deleted), and the paths given
    that do not exist (every source at or under one of them was moved or deleted)."""

    files: list[ScannedFile]
    failures: list[IndexFailure]
    skipped: list[tuple[str, str]]
    roots: list[Path]
    missing: list[Path] = field(default_factory=list)

    @property
    def gone_roots(self) -> list[Path]:
        """Where a source no longer found is gone: under a root, or at or under a missing path
        (one holding :data:`REPLACED` excepted: see :func:`gone_path`)."""
        return [*self.roots, *(p for p in self.missing if REPLACED not in str(p))]

    def report_counts(self) -> tuple[int, int, tuple[IndexFailure, ...]]:
        """``total_files``, ``indexed_files`` and ``failed_files`` of the run's report."""
        return len(self.files), len(self.files) - len(self.failures), tuple(self.failures)


def check_paths_exist(paths: Sequence[str], holds: Callable[[Path], bool]) -> None:
    """Refuse, before anything is indexed, a path that does not exist and under which the index
    holds nothing (``holds(path)``): ``MemSearch(["./memroy"])`` would otherwise index nothing
    without a word (the scanner skips a missing input, as the original's does), where ``memsearch
    index ./memroy`` is refused. The one check, for both. A missing path the index holds files
    under is a folder that was moved or deleted: the run removes them (``Indexer._prune``)."""
    missing = [Path(p).expanduser().absolute() for p in paths if not os.path.lexists(Path(p).expanduser())]
    unknown = [p for p in missing if not holds(p)]
    if not unknown:
        return
    # absolute, as the store's owner sees the paths of a routed call: one message either way
    raise PathNotFoundError(
        f"No such file or folder: {', '.join(map(str, unknown))} (nothing was indexed)",
        hint="check the path; index only reads paths that exist",
    )


def scan_paths(settings: IndexSettings) -> Scanned:
    """Step 1: the files under the paths (ignore rules, exclusions, links as the settings say)."""
    result = scan(
        list(settings.paths),
        ignore_files=list(settings.ignore_files),
        exclude=list(settings.exclude),
        follow_links=settings.follow_links,
    )
    given = [Path(p).expanduser() for p in settings.paths]
    roots = [p.resolve() for p in given if p.is_dir()]
    missing = [p.resolve() for p in given if not os.path.lexists(p)]
    failures = [IndexFailure(path, reason) for path, reason in result.problems]
    return Scanned(result.files, failures, result.skipped, roots, missing)


@dataclass
class Diff:
    """Step 2: the scan against the manifest. ``stat_changed`` may still hold the same bytes."""

    active: set[str]
    gone: list[str]
    stat_changed: list[ScannedFile]


def diff(scanned: Scanned, manifest: Manifest, force: bool) -> Diff:
    """Which files are new or touched (all with ``force``) and which indexed ones are gone."""
    active = {str(f.path) for f in scanned.files}
    gone = [p for p in manifest.files if p not in active and under(p, scanned.gone_roots)]
    stat_changed = [f for f in scanned.files if force or not entry_matches(manifest, f)]
    return Diff(active, gone, stat_changed)


@dataclass
class FileWork:
    """A changed file on its way into the store."""

    source: str
    entry: FileEntry
    chunks: list[Chunk]
    ids: list[str]
    to_embed: list[int] = field(default_factory=list)  # indexes into chunks
    stale: set[str] = field(default_factory=set)
    remaining: int = 0


def read_changed(
    settings: IndexSettings,
    changed: list[ScannedFile],
    manifest: Manifest,
    *,
    force: bool,
    private_text: PrivateText,
    warnings: list[str],
    failures: list[IndexFailure],
) -> list[FileWork]:
    """Step 3: read and chunk each touched file. A file whose bytes did not change only updates its
    manifest entry; one that cannot be read is a failure (and leaves the manifest); the others
    become :class:`FileWork` with their chunk IDs."""
    work: list[FileWork] = []
    for f in changed:
        source = str(f.path)
        old = manifest.files.get(source)
        problem = unnamable(source)
        if problem:  # its chunks could never be found again to update or delete
            warnings.append(f"skipped {source}: {problem}")
            continue
        try:
            known = None if force or old is None else old.sha256
            entry, chunks = read_and_chunk(settings, f, known, private_text, warnings)
        except (OSError, MemSearchError, ValueError) as exc:
            failures.append(IndexFailure(source, format_error(exc)))
            manifest.files.pop(source, None)
            continue
        if chunks is None:  # touched, not changed
            entry.chunks = old.chunks if old is not None else 0
            manifest.files[source] = entry
            continue
        entry.chunks = len(chunks)
        work.append(FileWork(source, entry, chunks, [c.chunk_id(settings.model) for c in chunks]))
    return work


def read_and_chunk(
    settings: IndexSettings,
    f: ScannedFile,
    known_sha256: str | None,
    private_text: PrivateText,
    warnings: list[str],
) -> tuple[FileEntry, list[Chunk] | None]:
    """A changed file's manifest entry and chunks (None: its bytes hash to ``known_sha256``).

    A function of its own so the file's bytes and decoded text are freed as soon as it is
    chunked: while the chunks are embedded, only they are held (a large file is about its size
    in chunks, not three copies of it).
    """
    raw = read_markdown_bytes(f.path, follow=settings.follow_links)
    entry = FileEntry(f.size, mtime_ns(f), hashlib.sha256(raw).hexdigest())
    if entry.sha256 == known_sha256:
        return entry, None
    decoded = decode_markdown(raw, f.path)
    del raw
    if decoded.warning:
        warnings.append(decoded.warning)
    text = private_text(decoded.text, f.path, warnings)
    if text is None:
        return entry, []
    return entry, chunk_markdown(
        text, str(f.path), max_chunk_size=settings.max_chunk_size, overlap_lines=settings.overlap_lines
    )
