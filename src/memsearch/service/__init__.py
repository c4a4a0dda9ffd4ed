"""The local memory service: one warm process owns a store; every other process asks it.

Why: Milvus Lite lets one process open a database, so with the original a running ``watch`` blocks
every ``search``, and agent hooks that index or search in parallel fail. Every command also pays
the start-up (pymilvus import, model load; docs/scaling.md). ``memsearch serve`` (and ``memsearch watch``)
keeps the store, the embedding model and the watchers open in one process and answers requests
on a Unix socket under the memsearch home; the CLI sends its request there when a service is
running for that store, and opens the store directly otherwise. The same ``MemSearch`` methods
run either way, so results are identical.

The package, along the lines of its parts:

- :mod:`~memsearch.service.paths`: where a store's service lives (run files, their safety checks);
- :mod:`~memsearch.service.protocol`: one JSON object per line, its limits and its errors;
- :mod:`~memsearch.service.client`: :func:`connect` and :class:`ServiceClient`, which sends an
  operation of ``memsearch.engine.operations`` to the service; standard library only, so a routed
  ``memsearch search`` never loads pymilvus, onnxruntime or asyncio;
- :mod:`~memsearch.service.ondemand`: starting a store's service for a command, at most
  ``service.max_on_demand`` of them, never for a read that cannot succeed;
- :mod:`~memsearch.service.manage`: every service of this user, seen and stopped over its socket
  (``memsearch service status|stop``); standard library only, like the client;
- :mod:`~memsearch.service.server`: :class:`MemoryService`, which imports the engine lazily. It is
  imported here only when one of its names is used.

Security and limits (other local users must not be able to read queries or inject memories, and
no client may exhaust the service): the run folders must be real directories owned by us with
mode 0700 (never followed through a symlink); both ends check the other's uid with
``SO_PEERCRED``; a request is at most :data:`MAX_REQUEST_BYTES` and must arrive within
:data:`IDLE_TIMEOUT` seconds; ``top_k`` and text sizes are capped; at most :data:`MAX_CONNECTIONS`
connections are served at once; a client gives up on a silent service after
:func:`client_timeout` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memsearch.errors import (
    ServiceError,
    ServiceRunningError,
    ServiceTimeoutError,
    ServiceUnavailableError,
)
from memsearch.service.client import (
    CONNECT_TIMEOUT,
    DEFAULT_CLIENT_TIMEOUT,
    NO_SERVICE_ENV,
    TIMEOUT_ENV,
    ServiceClient,
    client_timeout,
    connect,
)
from memsearch.service.paths import ServicePaths, clean_stale, read_info, service_paths, store_key
from memsearch.service.protocol import (
    MAX_CONTEXT_LINES,
    MAX_QUERY_CHARS,
    MAX_REQUEST_BYTES,
    MAX_TOP_K,
    RequestTooLarge,
    decode_message,
    error_from_payload,
    error_payload,
    peer_credentials,
)

if TYPE_CHECKING:
    from memsearch.service.server import HEARTBEAT_INTERVAL, IDLE_TIMEOUT, MAX_CONNECTIONS, MemoryService


_SERVER_NAMES = frozenset({"HEARTBEAT_INTERVAL", "IDLE_TIMEOUT", "MAX_CONNECTIONS", "MemoryService"})

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_CLIENT_TIMEOUT",
    "HEARTBEAT_INTERVAL",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_CONTEXT_LINES",
    "MAX_QUERY_CHARS",
    "MAX_REQUEST_BYTES",
    "MAX_TOP_K",
    "NO_SERVICE_ENV",
    "TIMEOUT_ENV",
    "MemoryService",
    "RequestTooLarge",
    "ServiceClient",
    "ServiceError",
    "ServicePaths",
    "ServiceRunningError",
    "ServiceTimeoutError",
    "ServiceUnavailableError",
    "clean_stale",
    "client_timeout",
    "connect",
    "decode_message",
    "error_from_payload",
    "error_payload",
    "peer_credentials",
    "read_info",
    "service_paths",
    "store_key",
]


def __getattr__(name: str) -> Any:
    """The server's names, imported on first use: a client process never loads the server."""
    if name in _SERVER_NAMES:
        from memsearch.service import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
