"""``open_memory``: the memory of a configured store for the CLI and the agent hooks.

Every caller gets a ``MemSearch``; where its operations run (this process, or the store's owner)
is decided per operation by ``memsearch.service.owner``, the one seam shared with library users.
What the CLI and the hooks add: a read command or a hook that finds nobody owning the store
starts a background service (``memsearch.service.ondemand``) rather than owning it for the few
hundred milliseconds it runs, so the next command finds the store, jieba and the model warm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory

__all__ = ["open_memory"]


def open_memory(
    cfg: MemSearchConfig,
    paths: Sequence[str] = (),
    *,
    start: bool = False,
    keep_model: bool = True,
    **extra: Any,
) -> Memory:
    """The memory of ``cfg``'s store for ``paths``, as a ``MemSearch`` that goes through the store's
    owner (``memsearch.service.owner``).

    With ``start`` (the CLI's read commands, the hooks), a store nobody owns gets a background
    service started for it when ``service.autostart`` allows it. ``keep_model=False`` is for a
    command that embeds once: a local model is dropped as soon as it is done with it. ``extra``
    are further ``MemSearch`` arguments (e.g. ``description``).
    """
    from memsearch.config.schema import config_kwargs
    from memsearch.core import MemSearch

    memory = MemSearch(paths, **{**config_kwargs(cfg), **extra}, keep_model=keep_model)
    if start:
        from memsearch.service import ondemand

        memory._spawn = lambda: ondemand.start_for(cfg)
    return memory
