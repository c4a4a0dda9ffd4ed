"""Reading files a project ships: journals, PROJECT.md, USER.md, skill candidates, meta.json.

A project folder usually arrives with ``git clone``, so whatever is in its ``.memsearch/`` was
written by whoever published the repository, not necessarily by memsearch. A symbolic link named
``USER.md`` pointing at ``~/.aws/credentials``, a FIFO named like a journal, a 10 GB PROJECT.md:
each would end up in an agent's context or a model request, or hang a hook. This module is the one
seam every read of such a file goes through, and it reads a file only when it is

- a regular file (a FIFO, a socket or a device is never opened for reading: the open does not
  block and the descriptor's ``fstat`` decides),
- not a symbolic link (the last component is opened with ``O_NOFOLLOW``) and, after resolving
  every folder on the way, inside the root it belongs to (the project, or the memory folder the
  user named), so a symlinked ``.memsearch`` or ``memory`` folder does not lead out either,
- no larger than the caller's bound.

Anything else is skipped with one warning line on stderr (once per path and process) and reads as
absent: a hook goes on without it, a listing shows the other files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from memsearch import files

__all__ = [
    "MAX_JOURNAL_BYTES",
    "MAX_SMALL_FILE_BYTES",
    "files_root",
    "is_inside",
    "project_files",
    "read_project_bytes",
    "read_project_text",
    "skip_reason",
    "warn",
]

#: Journals: the indexer's own bound for a markdown file.
MAX_JOURNAL_BYTES = 100 * 1024 * 1024
#: PROJECT.md, USER.md, SKILL.md, meta.json: far above anything memsearch writes (a model's answer
#: is capped at 40,000 characters).
MAX_SMALL_FILE_BYTES = 1024 * 1024


_warned: set[str] = set()


def files_root(project_dir: Path, memsearch_dir: Path) -> Path:
    """The folder a project's memory files must stay inside: the project, or the memory folder
    itself when the user put it elsewhere (``MEMSEARCH_DIR``, their own choice)."""
    project, memsearch = Path(project_dir).absolute(), Path(memsearch_dir).absolute()
    return project if is_inside(memsearch, project, resolve=False) else memsearch


def is_inside(path: Path, root: Path, *, resolve: bool = True) -> bool:
    """Whether ``path`` is ``root`` or below it (both resolved first unless ``resolve`` is False)."""
    try:
        a = Path(os.path.realpath(path)) if resolve else Path(os.path.abspath(path))
        b = Path(os.path.realpath(root)) if resolve else Path(os.path.abspath(root))
    except (OSError, ValueError):
        return False
    return a == b or b in a.parents


def warn(path: Path, reason: str) -> None:
    """One stderr line per skipped path and process (a hook's stderr goes to the host's log)."""
    key = f"{path}\0{reason}"
    if key in _warned:
        return
    _warned.add(key)
    with contextlib.suppress(OSError, ValueError):  # a closed stderr must not break the read
        print(f"memsearch: warning: skipped {path}: {reason}", file=sys.stderr)


def skip_reason(path: Path, root: Path) -> str | None:
    """Why ``path`` must not be read as a project file (None when it may be): judged from the
    path alone (``lstat``), without opening it. A missing file is ``"missing"``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link (project files are read only when they are regular files)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not is_inside(path, root):
        return f"outside {root} (a folder on the way is a symbolic link)"
    return None


def read_project_bytes(path: Path, root: Path, *, max_bytes: int = MAX_SMALL_FILE_BYTES) -> bytes | None:
    """The bytes of the project file ``path``, or None when it is missing or must not be read
    (then one warning line says why). Never follows a final symbolic link, never blocks on a FIFO,
    never reads more than ``max_bytes``."""
    path = Path(path)
    if not is_inside(path.parent, root):
        warn(path, f"outside {root} (a folder on the way is a symbolic link)")
        return None
    try:
        fd = files.open_own(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            warn(path, "a symbolic link (project files are read only when they are regular files)")
        elif exc.errno not in (errno.ENOTDIR, errno.ENOENT):
            warn(path, exc.strerror or str(exc))
        return None
    try:
        st = os.fstat(fd)
        if st.st_size > max_bytes:
            warn(path, f"{st.st_size} bytes, more than the {max_bytes} read from such a file")
            return None
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        warn(path, exc.strerror or str(exc))
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew after the fstat
        warn(path, f"more than the {max_bytes} bytes read from such a file")
        return None
    return data


def read_project_text(path: Path, root: Path, *, max_bytes: int = MAX_SMALL_FILE_BYTES) -> str:
    """:func:`read_project_bytes` as text (invalid UTF-8 replaced); "" when it is not read."""
    data = read_project_bytes(path, root, max_bytes=max_bytes)
    return "" if data is None else data.decode("utf-8", errors="replace")


def project_files(paths: Iterable[Path], root: Path) -> list[Path]:
    """The paths among ``paths`` that are regular files inside ``root`` (nothing opened); the
    others are skipped with a warning, missing ones silently."""
    kept = []
    for path in paths:
        reason = skip_reason(path, root)
        if reason is None:
            kept.append(path)
        elif reason != "missing":
            warn(path, reason)
    return kept
