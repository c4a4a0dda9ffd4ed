"""Connecting to Milvus: Milvus Lite driven in this process, or pymilvus for a server.

Owns the checks made before a Lite database is opened (platform, ``.db`` suffix, a database file
from an older Milvus Lite, its directory), and waiting for a database another process holds. Both
kinds come out as one typed :class:`~memsearch.store.driver.StoreDriver`. pymilvus is imported
only for a server (it is slow to import: docs/scaling.md), and installed only with the ``server``
extra.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memsearch import errors
from memsearch.config.values import URI_HINT, uri_problem
from memsearch.store.analyzer import JIEBA_QUIET
from memsearch.store.driver_errors import (
    data_dir_locked,
    describe_holders,
    driver_message,
    generic_open_error,
    is_driver_error,
    legacy_file_error,
    locked_hint,
    milvus_lite_major,
    quiet,
)
from memsearch.store.uri import StoreLocation

if TYPE_CHECKING:
    from memsearch.store.driver import StoreDriver

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0  # seconds; an unreachable server must fail fast
#: Seconds a second handshake may take when the first timed out on a server that does accept TCP
#: connections (busy, not gone); a refused or unroutable address is not tried again.
BUSY_TIMEOUT = 20.0
LOCK_POLL_INTERVAL = 0.2  # seconds between attempts on a locked Lite database


def _open_lite(location: StoreLocation, token: str | None, lock_timeout: float) -> StoreDriver:
    path = location.path
    assert path is not None
    if sys.platform == "win32":
        raise errors.StoreConnectionError(
            f"Milvus Lite (the local database {path}) is not available on Windows",
            hint=(
                "Run a Milvus server, e.g. `docker run -d -p 19530:19530 milvusdb/milvus:latest "
                "standalone`, and use --milvus-uri http://localhost:19530 "
                "(MemSearch(milvus_uri='http://localhost:19530')), or run memsearch under WSL2."
            ),
        )
    check_shape(location)
    if path.is_file():
        major = milvus_lite_major()
        if major is not None and major >= 3:
            raise legacy_file_error(path, major)
    _private_store_dir(path)

    from memsearch.store.lite import LiteClient

    logging.getLogger("jieba").addFilter(JIEBA_QUIET)  # idempotent
    deadline = time.monotonic() + max(0.0, lock_timeout)
    waited = False
    while True:
        failure: BaseException | None = None
        with quiet() as captured:
            try:
                client = LiteClient(str(path))
            except Exception as exc:
                if not is_driver_error(exc):
                    raise
                failure = exc
        if failure is None:
            return client
        cause = captured[0] if captured else failure
        if type(cause).__name__ != "DataDirLockedError" and not data_dir_locked(path):
            raise generic_open_error(path, cause) from cause
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.StoreLockedError(
                f"The Milvus Lite database {path} is in use by {describe_holders(path)}"
                + (f" (waited {lock_timeout:g} s)" if waited else ""),
                hint=locked_hint(path),
            ) from cause
        if not waited:
            logger.info("Waiting up to %g s for the Milvus Lite database %s", lock_timeout, path)
            waited = True
        time.sleep(min(LOCK_POLL_INTERVAL, remaining))


def check_shape(location: StoreLocation) -> None:
    """Refuse a URI that names no store (a Lite path not ending in ``.db``) before anything reads
    it: a read of such a path would otherwise answer "no collection" instead of what is wrong."""
    problem = uri_problem(location.uri)
    if problem is not None:
        raise errors.StoreConnectionError(problem[:1].upper() + problem[1:], hint=URI_HINT)


def _pymilvus(location: StoreLocation) -> Any:
    """pymilvus, which only a server URI needs (the ``server`` extra: it pulls pandas)."""
    try:
        import pymilvus
    except ImportError:
        raise errors.StoreConnectionError(
            f"A Milvus server ({location.display}) needs pymilvus, which is not installed",
            hint='install it: pip install "pymilvus>=2.6" (or this package with its [server] extra)',
        ) from None
    return pymilvus


def _private_store_dir(path: Path) -> None:
    """Create the database folder with mode 0700 before Milvus Lite fills it (it holds every
    indexed text), or make an existing one of ours 0700; refuse a folder that is another user's
    (opening it would search, and add to, what they planted). ``~/.memsearch``, the default
    store's parent, is made private too. A link the user made to a folder of theirs is followed."""
    from memsearch import private
    from memsearch.config import memsearch_home

    try:
        if path.parent == memsearch_home():
            private.home()
        private.private_dir(path, follow=True, what="a Milvus Lite database")
    except errors.PrivatePathError as exc:
        raise errors.StoreConnectionError(
            exc.message, hint=f"{exc.hint.rstrip('.')}; or choose another --milvus-uri."
        ) from None


def _open_server(location: StoreLocation, token: str | None, lock_timeout: float) -> StoreDriver:
    from memsearch.store.driver import ServerDriver

    pymilvus = _pymilvus(location)
    with quiet():
        try:
            try:
                client = pymilvus.MilvusClient(uri=location.uri, token=token or "", timeout=CONNECT_TIMEOUT)
            except Exception as exc:
                if not is_driver_error(exc) or not _accepts(location.uri):
                    raise
                # The server took the connection but not the handshake in time: busy, not gone
                # (a test suite's milvus-lite server writing on two shared cores took over 5 s).
                client = pymilvus.MilvusClient(uri=location.uri, token=token or "", timeout=BUSY_TIMEOUT)
            return ServerDriver(client, pymilvus)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            _, message = driver_message(exc)
            raise errors.StoreConnectionError(
                f"Cannot connect to Milvus at {location.display}: {message}",
                hint=(
                    "Check that the server is running and reachable and that the URI and token are "
                    "right (a local Milvus Lite database is a path ending in .db)."
                ),
            ) from exc


def _accepts(uri: str) -> bool:
    """Whether the server's address takes a TCP connection within a second."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https", "tcp"):
        return False  # a unix: socket or anything else: no second try
    default = 443 if parts.scheme == "https" else 19530
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or default), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


#: Location kind -> how to open a client for it (all take location, token, lock timeout).
_CONNECTORS: dict[str, Callable[[StoreLocation, str | None, float], StoreDriver]] = {
    "lite": _open_lite,
    "server": _open_server,
}


def open_driver(location: StoreLocation, *, token: str | None, lock_timeout: float) -> StoreDriver:
    """The driver for ``location``: Milvus Lite in this process, or pymilvus for a server.

    Every failure is a :class:`~memsearch.errors.StoreConnectionError` (or its Lite subclasses:
    locked, damaged) with a hint; a Lite database another process holds is waited for up to
    ``lock_timeout`` seconds.
    """
    return _CONNECTORS[location.kind](location, token, lock_timeout)
