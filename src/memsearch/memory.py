"""``open_memory``: the one place that decides whether a caller talks to the store's memory service
or opens the store itself, and whether to start that service first.

The CLI and the agent hooks call it and get a :class:`~memsearch.interface.Memory`; they never ask
which implementation they hold. The Python API (``MemSearch``) is not routed and never starts a
service: a library user owns the store it opens.
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
    start: bool = False,
    keep_model: bool = True,
    **extra: Any,
) -> Memory:
    """The memory of ``cfg``'s store for ``paths``: the store's memory service when one is running
    for it (and ``service`` is true), else a ``MemSearch`` that opens the store in this process.

    With ``start`` (the CLI's read commands, the hooks), a missing service is started first when
    ``service.autostart`` allows it (``memsearch.service.ondemand``), so that the next command finds
    it warm. ``keep_model=False`` is for a command that embeds once (one search, one index run)
    and opens the store itself: it drops a local model as soon as it is done with it
    (``MemSearch``'s argument; a service keeps its model for the next caller). ``extra`` are
    further ``MemSearch`` arguments (e.g. ``description``). Both implementations answer the same
    methods with the same results.
    """
    from memsearch.core import config_kwargs

    settings = {**config_kwargs(cfg), **extra}
    if service:
        from memsearch.service.client import ServiceMemory, connect

        client = connect(cfg.milvus.uri)
        if client is None and start:
            from memsearch.service import ondemand

            client = ondemand.start_for(cfg)
        if client is not None:
            return ServiceMemory(client, settings, paths)
    from memsearch.core import MemSearch

    return MemSearch(paths, **settings, keep_model=keep_model)
