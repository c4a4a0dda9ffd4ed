"""memsearch: semantic memory for markdown knowledge bases and AI coding agents.

The one public name is :class:`MemSearch`. It is loaded lazily so that ``import memsearch`` (and so
``memsearch --help``) stays cheap: the facade pulls in Milvus and embedding code only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["MemSearch", "__version__"]

if TYPE_CHECKING:
    from memsearch.core import MemSearch


def __getattr__(name: str) -> Any:
    # Both are computed on first use: reading package metadata is slow enough (docs/scaling.md)
    # that every routed CLI call would feel it.
    if name == "MemSearch":
        from memsearch.core import MemSearch

        return MemSearch
    if name == "__version__":
        from memsearch.version import package_version

        return package_version()
    raise AttributeError(f"module 'memsearch' has no attribute {name!r}")
