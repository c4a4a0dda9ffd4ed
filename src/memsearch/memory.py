"""``open_memory``: the one place that decides whether a caller talks to the store's memory service
or opens the store itself.

The CLI and the agent hooks call it and get a :class:`~memsearch.interface.Memory`; they never ask
which implementation they hold. The Python API (``MemSearch``) is not routed: a library user owns
the store it opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.interface import Memory

__all__ = ["open_memory"]


def open_memory(
    cfg: MemSearchConfig,
    paths: Sequence[str] = (),
    *,
    service: bool = True,
    **extra: Any,
) -> Memory:
    """The memory of ``cfg``'s store for ``paths``: the store's memory service when one is running
    for it (and ``service`` is true), else a ``MemSearch`` that opens the store in this process.

    ``extra`` are further ``MemSearch`` arguments (e.g. ``description``). Both answer the same
    methods with the same results.
    """
    from memsearch.core import config_kwargs

    settings = {**config_kwargs(cfg), **extra}
    if service:
        from memsearch.service.client import ServiceMemory, connect

        client = connect(cfg.milvus.uri)
        if client is not None:
            return ServiceMemory(client, settings, paths)
    from memsearch.core import MemSearch

    return MemSearch(paths, **settings)
