"""The agent wing: what an agent host's plugin runs, and what an agent is shown.

Private to memsearch; the wing's public faces are the original's ``memsearch.maintenance``,
``memsearch.skills`` and ``memsearch.transcript`` and the ``memsearch hook`` commands. ``hooks``
captures turns and recalls memory for each host (one platform row per host), ``framing`` wraps
memory text shown to a model as data, ``context_budget`` bounds what recall puts into an agent's
context, ``recall_log`` records what was recalled, and ``timeline`` is ``memsearch recent``. It may
import every wing below it, never the CLI (docs/architecture.md).
"""
