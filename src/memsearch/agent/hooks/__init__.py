"""The capture-and-recall engine every agent plugin calls: platform adapters × event handlers.

Each plugin's shim runs ``memsearch hook <platform> <event>`` with the host's JSON on stdin and
prints what this package answers. Everything a plugin needs lives here once:

- :mod:`~memsearch.agent.hooks.platforms` — the platform table (one :class:`Platform` row per host:
  Claude Code, Codex, ...), rows defined in :mod:`~memsearch.agent.hooks.claude_code`,
  :mod:`~memsearch.agent.hooks.codex`;
- :mod:`~memsearch.agent.hooks.events` — the shared handlers (session start, prompt submit, stop,
  session end);
- :mod:`~memsearch.agent.hooks.collection` — per-project collection names (the original's exact algorithm);
- :mod:`~memsearch.agent.hooks.summarize` — the summariser chain (configured provider, host CLI, extract);
- :mod:`~memsearch.agent.hooks.processes` — background watch/index processes and stopping only ours;
- :mod:`~memsearch.agent.hooks.install` — idempotent installers for hosts configured in the user's files;
- :mod:`memsearch.engine.journal` (beside this package) — the journal format, locking and dedup;
- :mod:`memsearch.transcript` — last-turn extraction for every transcript format.

Importing this package is cheap: no store, model or LLM client is loaded until a handler needs one.
"""

from __future__ import annotations

from memsearch.agent.hooks.base import Capture, HookContext, HookInput, Platform, Reply, render_hook_json
from memsearch.agent.hooks.collection import derive_collection
from memsearch.agent.hooks.engine import ACTIONS, HookUsageError, read_stdin, run_action, run_hook, run_worker

__all__ = [
    "ACTIONS",
    "Capture",
    "HookContext",
    "HookInput",
    "HookUsageError",
    "Platform",
    "Reply",
    "derive_collection",
    "read_stdin",
    "render_hook_json",
    "run_action",
    "run_hook",
    "run_worker",
]
