"""``python -m memsearch.agent.hooks.opencode_daemon``: the OpenCode capture daemon as a script.

The daemon itself is :mod:`memsearch.agent.hooks.opencode_capture` (what it does and why); this module
only hands it the OpenCode platform row. It is a module of its own, imported by nothing, because
the row imports the daemon for its ``daemon`` action: a script that both is the daemon and imports
the row would be loaded twice in one process (once as ``__main__``, once by the row) and close an
import loop.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # pragma: no cover - exercised as a subprocess by the tests
    from memsearch.agent.hooks.opencode import PLATFORM
    from memsearch.agent.hooks.opencode_capture import main

    sys.exit(main(PLATFORM))
