"""The driver's failures, turned into :mod:`memsearch.errors` classes with a hint.

Owns quieting the driver's own logging (it logs tracebacks for failures reported here as one
line), reading a driver exception's code and message, finding who holds a Milvus Lite database
(flock and ``/proc``), and the errors for a database that is damaged, from an older Milvus Lite,
or cannot be opened. Imports no driver: exceptions are recognised by their module's name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memsearch import errors, files

_LOCK_FILENAME = "LOCK"  # milvus-lite's advisory flock inside the database directory

GENERIC_HINT = (
    "Check the Milvus server's logs; if the index is damaged, `memsearch reset --yes` and "
    "re-indexing rebuild it from the markdown files."
)


# --- quieting the driver's own logging ------------------------------------------------------

#: Loggers that print driver-side tracebacks for failures we already turn into typed errors
#: (pymilvus logs every failed RPC with a traceback at ERROR; milvus-lite logs a failed open).
_QUIET_LOGGERS = (
    "pymilvus.decorators",
    "pymilvus.client.grpc_handler",
    "pymilvus.client.connection_manager",
    "pymilvus.client.iterator.query_iterator",
    "milvus_lite.server_manager",
    # "manifest.json failed to load, falling back to ...": a damaged database is reported once, as
    # a StoreDamagedError, or not at all when the fallback worked.
    "milvus_lite.storage.manifest",
)
_quiet_state = threading.local()


class _CaptureFilter(logging.Filter):
    """Drops records logged on this thread inside :func:`quiet`, keeping their exceptions."""

    def filter(self, record: logging.LogRecord) -> bool:
        captured: list[BaseException] | None = getattr(_quiet_state, "captured", None)
        if captured is None:
            return True
        if record.exc_info and record.exc_info[1] is not None:
            captured.append(record.exc_info[1])
        return False


_CAPTURE_FILTER = _CaptureFilter()


@contextlib.contextmanager
def quiet() -> Iterator[list[BaseException]]:
    """Silence the driver's log output on this thread; yield the exceptions it logged."""
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).addFilter(_CAPTURE_FILTER)  # idempotent
    previous = getattr(_quiet_state, "captured", None)
    captured: list[BaseException] = []
    _quiet_state.captured = captured
    try:
        yield captured
    finally:
        _quiet_state.captured = previous


def is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".", 1)[0] in {"pymilvus", "grpc", "milvus_lite"}


def driver_message(exc: BaseException) -> tuple[Any, str]:
    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError
        with contextlib.suppress(Exception):
            code = code()
        code = getattr(code, "name", code)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if callable(message):
        message = str(exc)
    return code, str(message)


# --- Milvus Lite: locks -------------------------------------------------------------------


def data_dir_locked(db_dir: Path) -> bool:
    """Whether some process holds milvus-lite's flock on the data folder ``db_dir`` (POSIX only;
    False when the lock file cannot be opened)."""
    if sys.platform == "win32":  # pragma: no cover
        return False
    try:
        return files.lock_is_held(db_dir / _LOCK_FILENAME)
    except OSError:
        return False


def lock_holders(db_dir: Path) -> list[tuple[int, str]]:
    """Best effort: (pid, command line) of processes with ``db_dir``'s LOCK file open (Linux /proc)."""
    target = os.path.realpath(db_dir / _LOCK_FILENAME)
    proc = Path("/proc")
    holders: list[tuple[int, str]] = []
    if not proc.is_dir():
        return holders
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list(os.scandir(entry / "fd"))
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd.path) != target:
                    continue
            except OSError:
                continue
            holders.append((int(entry.name), _cmdline(entry)))
            break
    return holders


def _cmdline(proc_dir: Path) -> str:
    try:
        raw = (proc_dir / "cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= 120 else text[:117] + "..."


def describe_holders(db_dir: Path) -> str:
    holders = lock_holders(db_dir)
    if not holders:
        return "another process"
    described = [f"process {pid} ({cmd})" if cmd else f"process {pid}" for pid, cmd in holders]
    return ", ".join(described)


def locked_hint(db_dir: Path) -> str:
    """What to do about a held database. A memsearch process holds it only as the store's owner,
    which every other memsearch process goes through unless ``MEMSEARCH_NO_SERVICE`` is set."""
    if any("memsearch" in cmd for _, cmd in lock_holders(db_dir)):
        return (
            "That is memsearch serving this store (a program, `memsearch serve` or a watch): every "
            "command goes through it unless MEMSEARCH_NO_SERVICE is set; unset it, or stop it "
            "(`memsearch service stop`)."
        )
    return (
        "Stop it: only memsearch processes share a store, through its owner (a program holding "
        "MemSearch, `memsearch serve`, a watch)."
    )


def milvus_lite_major() -> int | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("milvus-lite").split(".", 1)[0])
    except (PackageNotFoundError, ValueError):
        return None


def legacy_file_error(path: Path, major: int) -> errors.StoreConnectionError:
    return errors.StoreConnectionError(
        f"Could not open the Milvus Lite database at {path}: Milvus Lite {major}.x stores a database "
        "as a directory, but this path is a file",
        hint=(
            "If it is a database from Milvus Lite 2.x, move it aside and rebuild the index with "
            "`memsearch index`; otherwise check --milvus-uri, or use a Milvus server or Zilliz Cloud."
        ),
    )


# --- Milvus Lite: damaged databases ---------------------------------------------------------

#: The engine's own verdicts on files it could not read back.
_DAMAGE_ERRORS = frozenset({"ManifestCorruptedError", "WALCorruptedError"})
#: Engine functions that read the database's files (schema, manifest, Parquet segments, vector
#: indexes): a decoding failure raised inside one means a file holds something it never wrote.
_READING_FRAME = re.compile(r"_?(load|read)(_|$)")


def is_damage(exc: BaseException) -> bool:
    """Whether a Milvus Lite failure comes from unreadable database files (not a full disk, a
    permission problem or a bad request): the engine said so, or a JSON/Parquet/NumPy decoding
    error (not one of the engine's own errors) came out of one of its reading functions."""
    if type(exc).__name__ in _DAMAGE_ERRORS:
        return True
    chain = [exc] + ([exc.__cause__] if exc.__cause__ is not None else [])
    if any(isinstance(e, (OSError, MemoryError)) for e in chain):
        return False
    for e in chain:
        if type(e).__module__.split(".", 1)[0] == "milvus_lite":
            continue  # the engine's own errors are judged by their type (above), not where they arose
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if "milvus_lite" in code.co_filename and _READING_FRAME.match(code.co_name):
                return True
            tb = tb.tb_next
    return False


def damaged_error(path: Path, cause: BaseException) -> errors.StoreDamagedError:
    _, message = driver_message(cause)
    if len(message) > 300:
        message = message[:297] + "..."
    return errors.StoreDamagedError(
        f"The Milvus Lite database {path} is damaged: a file in it cannot be read ({message})",
        hint=(
            "The markdown files are the source of truth: run `memsearch reset --yes` (with the same "
            f"--milvus-uri/--collection), or delete {path}, then `memsearch index <paths>` to rebuild it."
        ),
    )


def generic_open_error(path: Path, cause: BaseException) -> errors.StoreError:
    if is_damage(cause):
        return damaged_error(path, cause)
    _, message = driver_message(cause)
    return errors.StoreConnectionError(
        f"Could not open the Milvus Lite database at {path}: {message}. Possible causes: another "
        "process already has the database open, wrong permissions, or a damaged database",
        hint=(
            "Close other processes using it and verify that the path is writable; preserve the "
            "database (copy it aside) and inspect the logs before attempting any recovery."
        ),
    )
