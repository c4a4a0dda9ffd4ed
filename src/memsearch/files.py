"""Writing a file so no reader sees half of it, and taking turns on a file with other processes.

This module owns :func:`atomic_write` (a temp file beside the target, then ``os.replace``) and the
advisory locks (``flock``): :func:`exclusive` on an open file, :func:`lock_file` (wait for a lock
file), :func:`try_lock` (take it or learn it is taken) and :func:`lock_is_held` (probe), and
:func:`open_own`, how every lock and log file is opened.

Why one module: manifests, index state, the config, the service's info file, the hook bookkeeping
and the Codex config are all rewritten while other processes may read them, and the journal, the
watch registry, the OpenCode capture passes and the memory service all serialise on a lock. Each of
those once had its own copy of the same few lines; the details that are easy to get wrong (a temp
name unique per writer, removing the temp file on failure, never following a link to a lock,
close-on-exec) now live in one place. Lock and log files often sit in a project's ``.memsearch/``,
which may come from ``git clone``: a FIFO or a link planted under their name must neither hang a
hook nor let a log truncate the file it points to. Stdlib only, cheap to import.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_write",
    "exclusive",
    "lock_file",
    "lock_is_held",
    "locked",
    "open_own",
    "replaced",
    "try_lock",
]

_OWN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_own(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
    """A descriptor (blocking) of memsearch's own lock or log file ``path``, opened with ``flags``
    plus no-follow and non-blocking: a link at ``path`` is never followed (ELOOP), a FIFO or device
    there cannot hang the open and is refused with an ``OSError``, as is anything not a regular file."""
    fd = os.open(path, flags | _OWN_FLAGS, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def atomic_write(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    private: bool = False,
    keep_mode: bool = False,
    fsync: bool = False,
) -> None:
    """Replace ``path``'s content with ``data`` (text is UTF-8) in one step, creating its directory.

    The data goes to a temp file in the same directory, named uniquely for this writer (concurrent
    writers never share one), which then replaces ``path``; on failure the temp file is removed and
    the ``OSError`` raised. A new file gets mode 0600 when ``private`` (it may hold keys), else the
    usual mode (0666 less the umask); with ``keep_mode`` an existing file keeps its mode. ``fsync``
    flushes the data to disk before the rename (for files a crash must not empty).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if keep_mode:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def exclusive(fh: IO[Any]) -> Iterator[None]:
    """Hold an exclusive lock on the open file ``fh`` for the block (waits for other holders)."""
    if sys.platform == "win32":  # pragma: no cover - the hooks and the service run on POSIX hosts
        import msvcrt

        fh.seek(0)
        msvcrt.locking(fh.fileno(), msvcrt.LK_LOCK, 1)
        try:
            yield
        finally:
            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def replaced(path: str | os.PathLike[str], fd: int) -> bool:
    """Whether ``path`` names another file than ``fd`` now (or none). A file rewritten as a temp
    file renamed over it (``scan --redact``, ``forget``) under the lock a writer waited for: the
    writer must reopen the name and lock again, or what it writes goes to the old, unlinked file."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return True
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)


@contextlib.contextmanager
def lock_file(path: str | os.PathLike[str], *, mode: int = 0o600) -> Iterator[None]:
    """Hold an exclusive lock on the lock file ``path`` (created, with ``mode``, as needed) for the
    block, waiting while another process holds it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = open_own(target, os.O_RDWR | os.O_CREAT, mode)
    with os.fdopen(fd, "r+b", buffering=0) as fh, exclusive(fh):
        yield


def try_lock(path: str | os.PathLike[str], *, mode: int = 0o600) -> int | None:
    """Take the lock file ``path`` without waiting: its open descriptor (the lock lasts until it is
    closed), or ``None`` when another process holds it.

    Never follows a link at ``path`` (:func:`open_own`); raises ``OSError`` when the file cannot be
    opened or created, or is not a regular file.
    """
    import fcntl

    fd = open_own(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_is_held(path: str | os.PathLike[str]) -> bool:
    """Whether some process holds the lock file ``path`` (``False`` when there is no such file).

    Never follows a link and never creates the file; raises ``OSError`` when it cannot be opened.
    """
    import fcntl

    try:
        fd = open_own(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we may just have taken
    return False


@contextlib.contextmanager
def locked(path: Path) -> Iterator[IO[bytes] | None]:
    """The file ``path`` open for reading and writing and locked as its writers lock it (None when
    it is gone): a flock on the file (the journal writers'), and first the lock file beside it when
    it has one (the recall log's ``<name>.lock``). When the name was renamed over while we waited
    (another rewrite), the new file is opened and locked instead."""
    sibling = path.with_name(path.name + ".lock")
    with lock_file(sibling) if sibling.is_file() else contextlib.nullcontext():
        while True:
            try:
                fd = open_own(path, os.O_RDWR)
            except FileNotFoundError:
                yield None
                return
            with os.fdopen(fd, "r+b") as fh, exclusive(fh):
                if replaced(path, fh.fileno()):
                    continue
                yield fh
                return
