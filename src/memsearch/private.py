"""Files only this user can reach: memsearch's own folders, caches and state, and reading them back.

memsearch keeps a store of everything it indexed, an embedding cache of the same text, optimised
model graphs and tables derived from installed files. None of it is meant for another local user,
and none of it may be trusted if another user could have put it there. This module owns the rules,
so every cache and state file follows the same ones:

- :func:`private_dir` makes a folder with mode 0700 (whatever the umask), or checks an existing
  one without following a link: a real directory, ours; one of ours that others can reach is
  made private (``fchmod`` on the opened directory). Anything else raises
  :class:`~memsearch.errors.PrivatePathError`, one line that says what is wrong and what to do.
- :func:`home` is ``~/.memsearch`` made so (the one place that creates it).
- :func:`read_private` reads a file without ever blocking or following a link: it opens with
  ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO planted at the name cannot hang the open) and ``fstat``\\ s the
  descriptor it got: a regular file owned by us, or an ``OSError``.
- :func:`write_private` replaces a file atomically with mode 0600.
- :func:`token` is a secret kept in such a file (the MCP HTTP transport's bearer token, the
  console's): made on first use, then kept, and replaced, never trusted, when it is not ours.
- :func:`restrict_umask`: the ``memsearch`` command's processes (the CLI, hooks, the memory
  service) create every file 0600 and folder 0700, including what Milvus Lite writes inside a
  store on its own threads; a library user's process keeps its umask (its store and caches are
  still in folders only it can enter).

Standard library only, cheap to import.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from memsearch import files
from memsearch.errors import PrivatePathError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "dir_problem",
    "home",
    "open_ours",
    "private_dir",
    "read_private",
    "restrict_umask",
    "token",
    "write_private",
]

DIR_MODE = 0o700
FILE_MODE = 0o600


def _uid() -> int:
    return os.getuid()


def dir_problem(path: Path, *, follow: bool = False, reachable_ok: bool = False) -> str | None:
    """Why ``path`` is not a private folder of ours (None when it is one). With ``follow`` a link
    to such a folder is accepted (``~/.memsearch`` may be a link the user made); with
    ``reachable_ok`` group/other permission bits are not a problem (the caller tightens them).
    Raises FileNotFoundError when it does not exist."""
    st = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != _uid():
        return f"is owned by uid {st.st_uid}, not by you (uid {_uid()})"
    if st.st_mode & 0o077 and not reachable_ok:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, not 0700 (other users can reach it)"
    return None


def _tighten(path: Path, *, follow: bool) -> None:
    """Mode 0700 on the directory ``path`` (opened first: never a link we did not mean to follow)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != DIR_MODE:
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)


def private_dir(
    path: Path, *, follow: bool = False, what: str = "memsearch's folder", hint: str = ""
) -> Path:
    """``path`` as a private folder of ours: created with mode 0700 (its parents as usual) when
    missing, made 0700 when it is ours but reachable by others; raises
    :class:`~memsearch.errors.PrivatePathError` when it is a link (unless ``follow``), not a
    folder, another user's, or cannot be created."""
    try:
        try:
            problem = dir_problem(path, follow=follow, reachable_ok=True)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # a racing process may create it: checked below
                os.mkdir(path, DIR_MODE)
            problem = dir_problem(path, follow=follow, reachable_ok=True)
        if problem is None:
            _tighten(path, follow=follow)
            return path
    except OSError as exc:
        raise PrivatePathError(
            f"Cannot use {path} as {what}: {exc.strerror or exc}",
            hint=hint or f"Check that {path.parent} is a folder you can write to (no file in the way).",
        ) from None
    raise PrivatePathError(
        f"Refusing to use {path} as {what}: it {problem}",
        hint=f"Move it aside (`mv {path} {path}.old`) so memsearch can create a private one; "
        "another user could otherwise read or plant memsearch's data.",
    )


def home() -> Path:
    """``~/.memsearch`` as a private folder (see :func:`private_dir`; a link the user made to a
    folder of theirs is followed)."""
    from memsearch.config import memsearch_home

    folder = memsearch_home()
    hint = f"Check that {folder.parent} is a folder you can write to, or set HOME to one."
    return private_dir(folder, follow=True, what="memsearch's home folder", hint=hint)


def home_dir(name: str) -> Path:
    """The private folder ``~/.memsearch/<name>`` (caches, state)."""
    return private_dir(home() / name)


def open_ours(path: Path, flags: int = os.O_RDONLY, mode: int = FILE_MODE) -> int:
    """A descriptor of ``path`` if it is a regular file owned by us: :func:`memsearch.files.open_own`
    (never follows a link at ``path``, never blocks on a FIFO or device) plus the owner, checked on
    the opened descriptor. FileNotFoundError when it is missing (and ``flags`` do not create it),
    another ``OSError`` saying why otherwise (callers treat both as "no cache")."""
    try:
        fd = files.open_own(path, flags, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise OSError(f"{path}: cannot open it safely ({exc.strerror or exc})") from None
    owner = os.fstat(fd).st_uid
    if owner != _uid():
        os.close(fd)
        raise OSError(f"{path} belongs to uid {owner}, not to you")
    return fd


def read_private(path: Path, *, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``) if it is a regular file of ours (:func:`open_ours`)."""
    with os.fdopen(open_ours(path), "rb") as fh:
        return fh.read() if limit is None else fh.read(limit)


def check_file(path: Path) -> os.stat_result:
    """``path``'s stat if it is a regular file of ours (:func:`open_ours`)."""
    fd = open_ours(path)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` in one step, mode 0600, in a private folder of ours."""
    private_dir(path.parent)
    files.atomic_write(path, data, private=True)


def token(name: str) -> str:
    """The secret kept in ``~/.memsearch/<name>`` (0600), made now if there is none (or it is not
    a private file of ours, or too short to be one: then it is replaced, never trusted)."""
    import secrets

    path = home() / name
    try:
        value = read_private(path, limit=256).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        value = ""
    if len(value) < 32:
        value = secrets.token_urlsafe(32)
        write_private(path, value + "\n")
    return value


def restrict_umask() -> None:
    """Add group and other bits to the process's umask: what it creates is private (0600 files,
    0700 folders). For processes memsearch owns (its console command), not for library users."""
    os.umask(os.umask(0o077) | 0o077)
