"""Where the memory service of a store lives: its run files, and the checks that keep them private.

Files under ``<home>/run/``: ``<key>.sock`` (the socket), ``<key>.lock`` (held with ``flock`` by
the serving process for its lifetime: one service per store, and released by the kernel even after
``kill -9``), ``<key>.json`` (pid, store, socket, start time, its owner and command line). The run
folders must be real directories owned by us with mode 0700, never followed through a symlink:
another local user must not be able to read queries or inject memories. Standard library only
(the client uses it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from memsearch import files
from memsearch.errors import PrivatePathError, UnsafeRunDirError

#: A Unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
_MAX_SOCKET_PATH = 100


@dataclasses.dataclass(frozen=True)
class ServicePaths:
    """The run files of the service of one store."""

    store: str
    socket: Path
    lock: Path
    info: Path


def store_key(uri: str) -> str:
    """The identity of a store: its resolved URI (a Lite path is made absolute)."""
    from memsearch.store.uri import resolve_uri

    return resolve_uri(uri).uri


def run_folder(home: Path | None = None) -> Path:
    """The folder of every service's lock and info files (``<home>/run``)."""
    if home is None:
        from memsearch.config import memsearch_home

        home = memsearch_home()
    return home / "run"


def service_paths(uri: str, home: Path | None = None) -> ServicePaths:
    """Run-file locations for the service of the store at ``uri``."""
    store = store_key(uri)
    key = hashlib.sha256(store.encode()).hexdigest()[:16]
    run = run_folder(home)
    sock = run / f"{key}.sock"
    if len(str(sock)) > _MAX_SOCKET_PATH:  # a deep HOME: fall back to a short private dir
        base = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/memsearch-{os.getuid()}")
        sock = base / f"{key}.sock"
    return ServicePaths(store, sock, run / f"{key}.lock", run / f"{key}.json")


def _dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a safe run folder (None when it is one): a real directory (not a
    symlink), owned by us, with no group/other permissions (``memsearch.private.dir_problem``,
    never following a link). Raises FileNotFoundError when it does not exist."""
    from memsearch import private  # not at import: the client loads only what it needs

    return private.dir_problem(path)


def _unsafe_dir_error(path: Path, problem: str) -> UnsafeRunDirError:
    if problem.startswith("has mode"):
        hint = f"make it private with `chmod 700 {path}`"
    else:
        hint = f"remove it (`rm -rf {path}`) so memsearch can create a private one"
    return UnsafeRunDirError(
        f"refusing to use {path} for the memory service: it {problem}",
        hint=hint + "; another user could otherwise read your queries or inject memories",
    )


def private_dir(path: Path) -> None:
    """Create ``path`` with mode 0700 if it is missing, then insist it is a safe run folder.
    Under ``~/.memsearch``, that folder is made private first (``memsearch.private.home``); a
    folder that cannot be created is one :class:`~memsearch.errors.PrivatePathError`."""
    from memsearch import private
    from memsearch.config import memsearch_home

    if path.parent == memsearch_home():
        private.home()
    try:
        try:
            problem = _dir_problem(path)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # a racing process may create it: checked below
                os.mkdir(path, 0o700)
                # mkdir applies the umask, which only removes bits; make sure we can use it ourselves.
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                try:
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
            problem = _dir_problem(path)
    except OSError as exc:  # a file where a folder should be, a parent we may not write to
        raise PrivatePathError(
            f"Cannot use {path} for the memory service: {exc.strerror or exc}",
            hint=f"Check that {path.parent} is a folder you can write to (and that no file is in the way).",
        ) from None
    if problem is not None:
        raise _unsafe_dir_error(path, problem)


def folder_problem(folder: Path) -> UnsafeRunDirError | None:
    """For clients (which never create anything): why ``folder`` is not a safe run folder, or None
    (also when it is missing: nothing can be listening there)."""
    try:
        problem = _dir_problem(folder)
    except OSError:
        return None
    return None if problem is None else _unsafe_dir_error(folder, problem)


def run_dirs_problem(paths: ServicePaths) -> UnsafeRunDirError | None:
    """For clients (which never create anything): the first unsafe run folder, or None."""
    for folder in dict.fromkeys((paths.lock.parent, paths.socket.parent)):
        problem = folder_problem(folder)
        if problem is not None:
            return problem
    return None


def file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def read_info(paths: ServicePaths) -> dict[str, Any]:
    """The running service's info file (pid, store, socket, ...), or {}."""
    return read_info_file(paths.info)


def read_info_file(path: Path) -> dict[str, Any]:
    """A service info file as a dict, or {} (missing, unreadable, not JSON, a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as fh:
            data = json.loads(fh.read(65536))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def lock_is_held(lock: Path) -> bool:
    """Whether some process holds the service lock (i.e. a service is alive).

    Raises OSError when the lock path is not a regular file we can open (never follows a link).
    """
    return files.lock_is_held(lock)


def clean_stale(paths: ServicePaths) -> bool:
    """Remove the socket and info files of a service that died without cleaning up.

    Returns True when something stale was removed. Never touches a live service's files, and
    removes only a socket (not a directory or anything else found at the socket's path).
    """
    if lock_is_held(paths.lock):
        return False
    removed = False
    for path, want in ((paths.socket, stat.S_ISSOCK), (paths.info, stat.S_ISREG)):
        with contextlib.suppress(OSError):
            if want(os.lstat(path).st_mode):
                path.unlink()
                removed = True
    return removed


def is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory; False when it cannot be looked at (a parent we may not read)."""
    try:
        return path.is_dir()
    except OSError:
        return False
