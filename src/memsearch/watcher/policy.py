"""Which paths count: :class:`IndexPolicy`, the scanner's rule with verdicts cached per path."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from memsearch.scanner import DEFAULT_EXTENSIONS, should_index_path, validate_ignore_files
from memsearch.watcher.events import PathLike

# --- which paths count ----------------------------------------------------------------------


class IndexPolicy:
    """``should_index_path`` for fixed roots, with verdicts cached per path.

    A cached verdict is reused while the ignore files in the directories from its root down to the
    path are unchanged (same mtime, ctime, size and inode, or still missing): checking costs a
    few ``stat`` calls, whereas the uncached rule reads and parses every ignore file on the way.
    Thread-safe; roots are resolved once, at construction.
    """

    def __init__(
        self,
        roots: Iterable[PathLike],
        *,
        ignore_files: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        extensions: Sequence[str] = DEFAULT_EXTENSIONS,
        max_entries: int = 10_000,
    ) -> None:
        self.roots = tuple(Path(r).expanduser().resolve() for r in roots)
        self.ignore_files = validate_ignore_files(ignore_files)
        self.exclude = tuple(exclude or ())
        self.extensions = tuple(e.lower() for e in extensions)
        self._dir_roots = tuple(r for r in self.roots if r.is_dir())
        self._max_entries = max_entries
        self._cache: dict[str, tuple[tuple[object, ...], bool]] = {}
        self._lock = threading.Lock()

    def __call__(self, path: PathLike) -> bool:
        candidate = Path(os.path.abspath(os.path.expanduser(path)))
        if candidate.suffix.lower() not in self.extensions:
            return False
        key = str(candidate)
        stamp = self._stamp(candidate)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        verdict = should_index_path(
            candidate,
            self.roots,
            extensions=self.extensions,
            ignore_files=self.ignore_files,
            exclude=self.exclude,
        )
        with self._lock:
            if len(self._cache) >= self._max_entries:
                self._cache.clear()
            self._cache[key] = (stamp, verdict)
        return verdict

    def _stamp(self, path: Path) -> tuple[object, ...]:
        """The state of every ignore file that can affect ``path``'s verdict."""
        if not self.ignore_files:
            return ()
        parts: list[object] = []
        for root in self._dir_roots:
            try:
                rel = path.relative_to(root)
            except ValueError:
                continue
            directory = root
            for depth in range(len(rel.parts)):
                if depth:
                    directory = directory / rel.parts[depth - 1]
                for name in self.ignore_files:
                    try:
                        st = os.stat(directory / name)
                    except OSError:
                        parts.append(None)
                        continue
                    parts.append((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return tuple(parts)
