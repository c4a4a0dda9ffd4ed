"""``open_memory``: the synchronous memory of a configured store for the CLI, the hooks, the MCP
server, maintenance and ``forget``.

Every caller gets a :class:`~memsearch.engine.interface.Memory` over a ``MemSearch``; where each operation
runs (this process, or the store's owner) is decided per operation by ``memsearch.service.owner``,
the one seam shared with library users. What the CLI and the hooks add: a read command or a hook
that finds nobody owning the store starts a background service (``memsearch.service.ondemand``)
rather than owning it for the few hundred milliseconds it runs, so the next command finds the
store, jieba and the model warm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memsearch.engine.lifecycle import ModelLifecycle

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory

__all__ = ["open_memory"]


def open_memory(
    cfg: MemSearchConfig,
    paths: Sequence[str] = (),
    *,
    start: bool = False,
    lifecycle: ModelLifecycle = ModelLifecycle.ONE_SHOT,
    **extra: Any,
) -> Memory:
    """The memory of ``cfg``'s store for ``paths``, going through the store's owner.

    With ``start`` (the CLI's read commands, the hooks), a store nobody owns gets a background
    service started for it when ``service.autostart`` allows it. ``lifecycle`` is how long a model
    this process loads is kept: by default a command's (``ONE_SHOT``: it embeds once, then exits);
    a long-lived caller (the MCP server) says ``KEEP``. ``extra`` are further ``MemSearch``
    arguments (e.g. ``description``).
    """
    from memsearch.config.schema import config_kwargs
    from memsearch.core import MemSearch
    from memsearch.engine.interface import Memory

    memsearch = MemSearch(paths, **{**config_kwargs(cfg), **extra}, model_lifecycle=lifecycle)
    if start:
        from memsearch.service import ondemand

        memsearch._spawn = lambda: ondemand.start_for(cfg)
    return Memory(memsearch)
