"""What the memory service does with its store for each request: the operations' table, as run here.

Why no list of its own: every store operation is a row of ``memsearch.engine.operations.OPERATIONS``
(its arguments, checked by ``protocol.parse_request`` before this runs, and how its result crosses
the socket). Each entry takes the engine for the caller's settings and the checked arguments, runs
the row's ``here`` method on the service's engine loop (which hands what blocks to worker threads:
``MemoryService``), and returns a JSON-able result. ``index`` is the service's own (it serialises
indexing runs), and so are ``ping``, ``stop`` and ``watch``, which are not store operations.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from memsearch.engine.operations import OPERATIONS, REQUIRED, Operation

if TYPE_CHECKING:
    from memsearch.core import MemSearch

Op = Callable[["MemSearch", dict[str, Any]], Coroutine[Any, Any, Any]]


def _runner(op: Operation) -> Op:
    async def run(ms: MemSearch, args: dict[str, Any]) -> Any:
        result = getattr(ms, op.here)(**{**_defaults(op), **args})
        if op.embeds:
            result = await result
        return op.encode(result) if op.encode is not None else result

    return run


def _defaults(op: Operation) -> dict[str, Any]:
    """The defaults of the arguments a request may leave out (the ``here`` methods take them all)."""
    return {p.name: p.default for p in op.params if p.default is not REQUIRED}


#: Request name -> what the service runs for it: every store operation but ``index``.
STORE_OPS: dict[str, Op] = {op.op: _runner(op) for op in OPERATIONS.values() if op.op != "index"}
