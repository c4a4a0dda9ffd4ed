"""memsearch: semantic memory for markdown knowledge bases and AI coding agents.

The one public name is :class:`MemSearch`. It is loaded lazily so that ``import memsearch`` (and so
``memsearch --help``) stays cheap: the facade pulls in Milvus and embedding code only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["MemSearch", "__version__"]

if TYPE_CHECKING:
    from memsearch.core import MemSearch


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memsearch")
    except PackageNotFoundError:  # running from a source tree
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    # Both are computed on first use: reading package metadata alone costs ~40 ms, which every
    # routed CLI call would pay.
    if name == "MemSearch":
        from memsearch.core import MemSearch

        return MemSearch
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'memsearch' has no attribute {name!r}")
