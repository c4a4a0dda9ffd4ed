"""What the memory service does with its store for each request: one table, operation -> coroutine.

Why a table of its own: the service's lifecycle, connections and limits (``server``) are one
concern, what each operation does with an engine is another, and the protocol's argument checks
(``protocol.ARGS``) already name the same operations. Each entry takes the engine for the caller's
settings and the checked arguments, runs on the service's engine loop (so store access never runs
concurrently with itself), and returns a JSON-able result. ``index`` is the service's own (it
serialises indexing runs), and so are ``ping`` and ``stop``, which touch no store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.core import MemSearch

Op = Callable[["MemSearch", dict[str, Any]], Coroutine[Any, Any, Any]]


async def _search(ms: MemSearch, args: dict[str, Any]) -> Any:
    """``search`` with every argument the request gave: ``protocol.ARGS`` already refused any other
    name and a wrong type, so its table is the one list of what ``search`` takes."""
    options = {name: value for name, value in args.items() if name != "query"}
    return await ms.search(args["query"], **options)


async def _expand(ms: MemSearch, args: dict[str, Any]) -> Any:
    expansion = ms.expand(
        args["chunk_hash"], section=bool(args.get("section", True)), context_lines=args.get("context_lines")
    )
    return dataclasses.asdict(expansion)


async def _count(ms: MemSearch, args: dict[str, Any]) -> Any:
    return ms.count(missing_ok=bool(args.get("missing_ok", True)))


async def _reset(ms: MemSearch, _args: dict[str, Any]) -> None:
    ms.reset()


async def _index_file(ms: MemSearch, args: dict[str, Any]) -> Any:
    return await ms.index_file(str(args["path"]))


async def _remove_file(ms: MemSearch, args: dict[str, Any]) -> Any:
    return ms.remove_file(str(args["path"]))


async def _query(ms: MemSearch, args: dict[str, Any]) -> Any:
    return ms.store.query(filter_expr=str(args.get("filter_expr", "")))


STORE_OPS: dict[str, Op] = {
    "search": _search,
    "expand": _expand,
    "count": _count,
    "reset": _reset,
    "index_file": _index_file,
    "remove_file": _remove_file,
    "query": _query,
}
