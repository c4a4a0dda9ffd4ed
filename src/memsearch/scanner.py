"""Which files get indexed, and how a markdown file is read.

This module owns file discovery (walking the given paths, extension and hidden-file rules, the
opt-in ``.gitignore``-style ignore files and ``exclude`` patterns, dedup by real path) and the one
function that turns a file's bytes into text (``read_markdown``: binary and oversize files refused,
invalid UTF-8 decoded with replacement and a warning). The watcher asks the same question for one
path through ``should_index_path``.

Semantics follow the original memsearch: ignore rules are off unless ignore
files or excludes are given; they are bounded by each root (never read from a root's parents);
an explicitly named file is always eligible. What we add: a walk never crashes or
hangs — symlink loops, unreadable directories, broken links and FIFOs become entries in
``ScanResult.problems`` — and only regular files are returned, so a reader never blocks on a pipe.
With ``follow_links=False`` a walk is *contained*: a file that is a symbolic link, or whose real
path lies outside the root it was found under, is a problem too and never read (a project's memory
folder arrives with ``git clone``: a link there named ``notes.md`` could point at
``~/.aws/credentials``, and what is indexed reaches the agent through search and expand).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.errors import (
    BinaryFileError,
    ConfigValueError,
    FileTooLargeError,
    NotARegularFileError,
)

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "BINARY_SNIFF_BYTES",
    "DEFAULT_EXTENSIONS",
    "MAX_MARKDOWN_BYTES",
    "BinaryFileError",
    "DecodedText",
    "FileTooLargeError",
    "NotARegularFileError",
    "ScanResult",
    "ScannedFile",
    "contained_problem",
    "decode_markdown",
    "read_markdown",
    "read_markdown_bytes",
    "scan",
    "scan_paths",
    "should_index_path",
    "validate_ignore_files",
]

DEFAULT_EXTENSIONS: tuple[str, ...] = (".md", ".markdown")
#: A project's memory folder (the agent plugins' journals), below the project's root.
PROJECT_MEMORY = Path(".memsearch", "memory")
# Far larger than any journal or note a person writes (the original has no limit, and a 20 MB
# export must index as it does there). Above this a file is almost surely a generated dump: the
# indexer holds a file's text and its chunks while it embeds them (a multiple of the file's size
# at peak, docs/scaling.md), so the limit is what bounds memory for one file.
MAX_MARKDOWN_BYTES = 100 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192  # a NUL byte in this prefix means "not text" (same test as git's)

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

PathLike = str | os.PathLike[str]


# --- errors ---------------------------------------------------------------------------------


# --- data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScannedFile:
    """A file to index. ``path`` is the walk path (not symlink-resolved); stat taken at scan time."""

    path: Path
    mtime: float
    size: int
    mtime_ns: int = 0


@dataclass(frozen=True)
class ScanResult:
    """Files found, plus ``(path, reason)`` for everything that could not be looked at, and for
    files named explicitly that are not markdown (skipped, not failed: worth a warning)."""

    files: list[ScannedFile] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class DecodedText:
    """A file's text; ``warning`` is set when invalid UTF-8 had to be replaced."""

    text: str
    warning: str | None = None


# --- ignore rules ---------------------------------------------------------------------------


def validate_ignore_files(ignore_files: Iterable[str] | None) -> tuple[str, ...]:
    """Bare ignore-file names, stripped and de-duplicated in order.

    A name with a directory part would make rules apply outside the directory that holds them,
    so it is rejected rather than guessed at.
    """
    names: list[str] = []
    for raw in ignore_files or ():
        name = str(raw).strip()
        if not name or name in (".", "..") or "/" in name or "\\" in name or Path(name).name != name:
            raise ConfigValueError(
                f"Ignore file must be a filename without directory components: {raw!r}",
                hint="give a bare name such as .gitignore; it is looked up in every indexed directory",
            )
        if name not in names:
            names.append(name)
    return tuple(names)


def _exclude_patterns(exclude: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(p for p in (str(x).strip() for x in exclude or ()) if p)


class _IgnoreMatcher:
    """Gitignore-style verdicts for paths under one root.

    Ignore files are read once per directory and cached for the life of the matcher (one walk,
    or one ``should_index_path`` call), so a walk reads each ignore file once.
    """

    def __init__(
        self,
        root: Path,
        ignore_files: tuple[str, ...],
        exclude: tuple[str, ...],
        problems: list[tuple[str, str]] | None = None,
    ) -> None:
        from pathspec import GitIgnoreSpec

        self._spec_class = GitIgnoreSpec
        self.root = root
        self.ignore_files = ignore_files
        self.exclude = GitIgnoreSpec.from_lines(exclude) if exclude else None
        self.problems = problems
        self._cache: dict[Path, list[GitIgnoreSpec]] = {}

    def _specs(self, directory: Path) -> list[GitIgnoreSpec]:
        specs = self._cache.get(directory)
        if specs is None:
            specs = []
            for name in self.ignore_files:
                path = directory / name
                try:
                    if not path.is_file():
                        continue
                    text = path.read_bytes().decode("utf-8", errors="replace")
                except OSError as exc:
                    if self.problems is not None:
                        self.problems.append((str(path), _reason(exc)))
                    continue
                specs.append(self._spec_class.from_lines(text.splitlines()))
            self._cache[directory] = specs
        return specs

    def is_ignored(self, path: Path, *, is_dir: bool = False) -> bool:
        """Apply each directory's specs from the root down, then ``exclude``; last definite wins."""
        rel = path.relative_to(self.root)
        suffix = "/" if is_dir else ""
        ignored = False
        directory = self.root
        parts = rel.parts
        for depth in range(len(parts)):
            if depth:
                directory = directory / parts[depth - 1]
            sub = "/".join(parts[depth:]) + suffix
            for spec in self._specs(directory):
                verdict = spec.check_file(sub).include
                if verdict is not None:
                    ignored = verdict
        if self.exclude is not None:
            verdict = self.exclude.check_file(rel.as_posix() + suffix).include
            if verdict is not None:
                ignored = verdict
        return ignored


# --- scanning -------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _normalise_extensions(extensions: Iterable[str]) -> tuple[str, ...]:
    return tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions)


def _stat_regular(path: Path, problems: list[tuple[str, str]]) -> os.stat_result | None:
    """``stat`` following links; broken links, loops and non-regular files become problems."""
    try:
        st = path.stat()
    except OSError as exc:
        problems.append((str(path), _reason(exc)))
        return None
    if not stat.S_ISREG(st.st_mode):
        problems.append((str(path), "not a regular file"))
        return None
    return st


def contained_problem(path: Path, roots: Iterable[Path]) -> str | None:
    """Why ``path`` may not be read in a contained walk of ``roots`` (None when it may be): it is a
    symbolic link, or its real path is in none of the (resolved) ``roots``. Judged without opening it."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return "a symbolic link (links are not followed in this index)"
    except OSError as exc:
        return _reason(exc)
    real = Path(_real(path))
    if not any(real == root or root in real.parents for root in roots):
        return "outside the indexed folder (a folder on the way is a symbolic link)"
    return None


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, RuntimeError, ValueError):  # pragma: no cover - realpath is non-strict
        return str(path)


def scan(
    paths: Iterable[PathLike] | PathLike,
    *,
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    ignore_hidden: bool = True,
    ignore_files: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    follow_links: bool = True,
) -> ScanResult:
    """Find markdown files under ``paths``; never raises for a bad file or directory.

    Directories are walked top-down without following symlinked directories (which is what makes
    symlink loops harmless). Files found twice (overlapping roots, links) are kept once, by real
    path; the result is sorted by path. Missing inputs are skipped silently, like the reference.
    ``follow_links=False`` skips, as problems, files that are links or lead outside their root
    (:func:`contained_problem`); a root named by the caller is resolved either way.
    """
    if isinstance(paths, (str, os.PathLike)):  # one path given bare: not a string of 1-char paths
        paths = [paths]
    exts = _normalise_extensions(extensions)
    names = validate_ignore_files(ignore_files)
    excludes = _exclude_patterns(exclude)
    rules_enabled = bool(names or excludes)
    problems: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    found: dict[str, ScannedFile] = {}

    def add(path: Path, root: Path) -> None:
        problem = None if follow_links else contained_problem(path, [root])
        if problem is not None:
            problems.append((str(path), problem))
            return
        st = _stat_regular(path, problems)
        if st is None:
            return
        found.setdefault(_real(path), ScannedFile(path, st.st_mtime, st.st_size, st.st_mtime_ns))

    def on_error(exc: OSError) -> None:  # os.walk reports a directory it cannot list
        problems.append((str(exc.filename), _reason(exc)))

    roots: list[Path] = []
    journals: list[Path] = []  # project memory folders a walk may have left out as hidden
    for raw in paths:
        try:
            root = Path(raw).expanduser().resolve()
            is_dir = stat.S_ISDIR(root.stat().st_mode)
        except (FileNotFoundError, NotADirectoryError):
            continue  # a missing input is not an error (reference behaviour)
        except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop before Python 3.13
            problems.append((str(raw), _reason(exc)))
            continue
        if not is_dir:
            if root.suffix.lower() in exts:
                add(root, root)
            else:
                skipped.append((str(raw), f"not a markdown file (only {', '.join(exts)} are indexed)"))
            continue
        matcher = _IgnoreMatcher(root, names, excludes, problems) if rules_enabled else None
        roots.append(root)

        for dirpath, dirnames, filenames in os.walk(root, onerror=on_error):
            here = Path(dirpath)
            kept_dirs = []
            for d in sorted(dirnames):
                if ignore_hidden and d.startswith("."):
                    if d == PROJECT_MEMORY.parts[0]:
                        journals.append(here / PROJECT_MEMORY)
                    continue
                if matcher is not None and matcher.is_ignored(here / d, is_dir=True):
                    continue
                kept_dirs.append(d)
            dirnames[:] = kept_dirs
            for name in sorted(filenames):
                if ignore_hidden and name.startswith("."):
                    continue
                path = here / name
                if path.suffix.lower() not in exts:
                    continue
                if matcher is not None and matcher.is_ignored(path):
                    continue
                add(path, root)
    skipped += _journals_left_out(journals, roots)
    return ScanResult(sorted(found.values(), key=lambda f: f.path), problems, skipped)


def _walked_into(folder: Path, root: Path) -> bool:
    """Whether a walk of ``root`` reaches ``folder`` (inside it, through no hidden folder)."""
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return False
    return not any(part.startswith(".") for part in parts)


def _journals_left_out(journals: list[Path], roots: list[Path]) -> list[tuple[str, str]]:
    """A ``skipped`` line for each project memory folder (``.memsearch/memory``, the agents'
    journals) that a walk left out because it is hidden, unless another path given covers it:
    ``memsearch index .`` in a project would otherwise leave the journals out without a word."""
    import shlex

    out = []
    for folder in journals:
        if not folder.is_dir() or any(_walked_into(folder, root) for root in roots):
            continue
        here = Path.cwd()
        shown = str(folder.relative_to(here)) if here in folder.parents else str(folder)
        out.append(
            (
                shown,
                "the agents' journals, in a hidden folder, which indexing a folder leaves out; name it "
                f"to index it too: memsearch index {shlex.quote(shown)}",
            )
        )
    return out


def scan_paths(
    paths: Iterable[PathLike] | PathLike,
    *,
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    ignore_hidden: bool = True,
    ignore_files: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> list[ScannedFile]:
    """The reference API: ``scan(...)`` without the problem list."""
    return scan(
        paths, extensions=extensions, ignore_hidden=ignore_hidden, ignore_files=ignore_files, exclude=exclude
    ).files


def should_index_path(
    path: PathLike,
    roots: Iterable[PathLike],
    *,
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    ignore_hidden: bool = True,
    ignore_files: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> bool:
    """Would a scan of ``roots`` pick up ``path``? (The watcher's per-event filter.)

    Ignore files are re-read on every call so edits to them take effect without a restart.
    """
    exts = _normalise_extensions(extensions)
    names = validate_ignore_files(ignore_files)
    excludes = _exclude_patterns(exclude)
    try:
        candidate = Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return False
    if candidate.suffix.lower() not in exts:
        return False
    for raw_root in roots:
        try:
            root = Path(raw_root).expanduser().resolve()
            is_dir = stat.S_ISDIR(root.stat().st_mode)
        except (OSError, RuntimeError):
            continue  # missing or unusable root
        if not is_dir:
            if candidate == root:
                return True
            continue
        try:
            rel = candidate.relative_to(root)
        except ValueError:
            continue
        if ignore_hidden and any(part.startswith(".") for part in rel.parts):
            continue
        if not (names or excludes):
            return True
        if not _IgnoreMatcher(root, names, excludes).is_ignored(candidate):
            return True
    return False


# --- reading --------------------------------------------------------------------------------


def read_markdown(path: PathLike, *, max_bytes: int = MAX_MARKDOWN_BYTES) -> DecodedText:
    """Read a markdown file as text, refusing what is not text.

    Raises ``BinaryFileError`` (NUL byte in the first 8 KiB), ``FileTooLargeError`` or
    ``NotARegularFileError``; an unreadable or missing file raises the ``OSError`` as is, for the
    caller to report per file. Invalid UTF-8 never fails: it is replaced with U+FFFD and the
    returned warning names the file and the byte offset of the first bad byte. A UTF-8 BOM is
    dropped; a UTF-16 BOM (Windows Notepad) is honoured.
    """
    return decode_markdown(read_markdown_bytes(path, max_bytes=max_bytes), path)


def read_markdown_bytes(path: PathLike, *, max_bytes: int = MAX_MARKDOWN_BYTES, follow: bool = True) -> bytes:
    """The raw bytes of a markdown file, after the regular-file and size checks.

    For callers that hash the bytes before decoding them (the indexer), so a file is read once.
    ``follow=False`` (a contained index) refuses a link put in the file's place since the scan.
    """
    p = Path(path)
    opener = _open_nonblocking if follow else _open_nofollow
    with open(p, "rb", opener=opener) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFileError(
                f"{p} is not a regular file", hint="only regular markdown files can be indexed"
            )
        if st.st_size > max_bytes:
            raise FileTooLargeError(
                f"{p} is {_mib(st.st_size)}, larger than the {_mib(max_bytes)} limit for a markdown file",
                hint="split it into smaller files, or leave it out with --exclude",
            )
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew after the stat
        raise FileTooLargeError(
            f"{p} is larger than the {_mib(max_bytes)} limit for a markdown file",
            hint="split it into smaller files, or leave it out with --exclude",
        )
    return data


def decode_markdown(data: bytes, path: PathLike) -> DecodedText:
    """Decode a markdown file's bytes (``read_markdown`` without the file checks).

    For callers that already hold the bytes (the indexer hashes them first), so a file is read
    once. ``path`` only names the file in messages.
    """
    p = Path(path)
    if data.startswith(_UTF16_BOMS):
        return DecodedText(data.decode("utf-16", errors="replace").lstrip("\ufeff"))
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise BinaryFileError(
            f"{p} looks like a binary file, not markdown",
            hint="rename it or leave it out with --exclude; only text files are indexed",
        )
    offset = 0
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
        offset = len(_UTF8_BOM)
    try:
        return DecodedText(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        warning = f"invalid UTF-8 in {p} at byte {exc.start + offset}; undecodable bytes replaced with U+FFFD"
        return DecodedText(data.decode("utf-8", errors="replace"), warning)


def _open_nonblocking(path: str, flags: int) -> int:
    """Open without blocking on a FIFO, so the regular-file check can reject it."""
    nonblock = getattr(os, "O_NONBLOCK", 0)  # POSIX only; Windows has no FIFOs to block on
    fd = os.open(path, flags | nonblock)
    if nonblock:
        os.set_blocking(fd, True)
    return fd


def _open_nofollow(path: str, flags: int) -> int:
    """:func:`_open_nonblocking` that also refuses a symbolic link (ELOOP)."""
    return _open_nonblocking(path, flags | getattr(os, "O_NOFOLLOW", 0))


def _mib(n: int) -> str:
    """A human size for messages."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
