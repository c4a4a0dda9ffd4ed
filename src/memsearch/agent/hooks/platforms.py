"""The platform table: host name → adapter row. Adding a host agent is one entry in :data:`ROWS`.

Everything else that lists hosts is derived from the rows: :data:`PLATFORMS`, :data:`INSTALLERS`
and :data:`DOCTORS` here, the host-only actions the engine dispatches (``Platform.actions``), and
``memsearch.config.PLUGIN_PLATFORMS`` (a literal there, so that reading the configuration never
imports the adapters; tests/test_plugins_layout.py checks it against the rows).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memsearch.agent.hooks import claude_code, codex, dsh, openclaw, opencode
from memsearch.agent.hooks.base import Platform

__all__ = ["DOCTORS", "INSTALLERS", "PLATFORMS", "ROWS"]

#: One row per host agent.
ROWS: tuple[Platform, ...] = (
    claude_code.PLATFORM,
    codex.PLATFORM,
    opencode.PLATFORM,
    openclaw.PLATFORM,
    dsh.PLATFORM,
)

#: Platform name (as in ``memsearch hook <platform> <event>`` and ``plugins.<platform>.*``) → row.
PLATFORMS: dict[str, Platform] = {row.name: row for row in ROWS}

#: Platform → installer (hosts that read hooks from the user's own configuration).
INSTALLERS: dict[str, Callable[[Path], str]] = {row.name: row.installer for row in ROWS if row.installer}
#: Platform → check that the host will run the installed hooks.
DOCTORS: dict[str, Callable[[], str]] = {row.name: row.doctor for row in ROWS if row.doctor}
