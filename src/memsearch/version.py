"""The installed package's version, for the ``--version`` flag, User-Agent headers and banners.

A module of its own (not ``memsearch/__init__``) so that low-level modules can read the version
without importing the package root, whose lazy ``MemSearch`` attribute reaches the whole facade.
"""

from __future__ import annotations

__all__ = ["package_version"]


def package_version() -> str:
    """The version in the installed metadata (read on each call: reading it is slow, docs/scaling.md,
    so callers pay only when they need it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memsearch")
    except PackageNotFoundError:  # running from a source tree
        return "0.0.0+unknown"
