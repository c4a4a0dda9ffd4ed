"""The platform table: host name → adapter row. Adding a host agent is one entry here."""

from __future__ import annotations

from memsearch.hooks import claude_code, codex, openclaw, opencode
from memsearch.hooks.base import Platform

__all__ = ["PLATFORMS"]

#: Platform name (as in ``memsearch hook <platform> <event>`` and ``plugins.<platform>.*``) → row.
PLATFORMS: dict[str, Platform] = {
    claude_code.PLATFORM.name: claude_code.PLATFORM,
    codex.PLATFORM.name: codex.PLATFORM,
    openclaw.PLATFORM.name: openclaw.PLATFORM,
    opencode.PLATFORM.name: opencode.PLATFORM,
}
