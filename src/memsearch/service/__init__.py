"""The local memory service: one warm process owns a store; every other process asks it.

Why: Milvus Lite lets one process open a database, so with the original a running ``watch`` blocks
every ``search``, and agent hooks that index or search in parallel fail. Every command also pays
the start-up (pymilvus import, model load; docs/scaling.md). ``memsearch serve`` (and ``memsearch
watch``) keeps the store, the embedding model and the watchers open in one process and answers
requests on a Unix socket under the memsearch home; the CLI sends its request there when a service
is running for that store, and opens the store directly otherwise. The same ``MemSearch`` methods
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
- :mod:`~memsearch.service.server`: :class:`MemoryService`, which imports the engine lazily.

Security and limits (other local users must not be able to read queries or inject memories, and no
client may exhaust the service): the run folders must be real directories owned by us with mode
0700 (never followed through a symlink); both ends check the other's uid with ``SO_PEERCRED``; a
request is at most :data:`~memsearch.service.protocol.MAX_REQUEST_BYTES` and must arrive within
:data:`~memsearch.service.server.IDLE_TIMEOUT` seconds; ``top_k`` and text sizes are capped; at
most :data:`~memsearch.service.server.MAX_CONNECTIONS` connections are served at once; a client
gives up on a silent service after :func:`~memsearch.service.client.client_timeout` seconds.

This package re-exports nothing: each name is imported from the module that owns it, so a client
process loads only the modules it uses.
"""
