"""Resources a host can attach to a session: today's journal, the recent journals' skeleton, and
PROJECT.md and USER.md when they exist.

They are read the way the plugins read them (``memsearch.engine.project_files``: regular files inside the
project only, bounded in size), framed as data, and held to the result budget.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.agent.framing import DATA_NOTE, frame

if TYPE_CHECKING:
    from memsearch.mcp.budget import Budget
    from memsearch.mcp.scope import McpScope

__all__ = ["RESOURCE_FILES", "resource_readers"]

#: Resource URI -> the file under the memory folder (``.memsearch/``) it shows.
RESOURCE_FILES = {"memsearch://project": "PROJECT.md", "memsearch://user": "USER.md"}


def _framed(text: str, source: str, budget: Budget, empty: str) -> str:
    from memsearch import exits

    if not text.strip():
        return empty
    kept, left = budget.clip(exits.out(text, "journal"))  # the whole file, then the cut
    out = f"{DATA_NOTE}\n{frame(kept, source)}"
    if left:
        out += f"\n[truncated: {left} more characters; search the memory for the rest]"
    return out


def resource_readers(scope: McpScope, budget: Budget) -> dict[str, tuple[str, Callable[[], str]]]:
    """URI -> (description, reader) for every resource this server offers. The journals are
    always offered (they may appear any time); PROJECT.md and USER.md only when they exist now."""
    from memsearch.engine.journal import day_file, recent_memory
    from memsearch.engine.project_files import MAX_JOURNAL_BYTES, read_project_text

    root = scope.files_root

    def today() -> str:
        path = day_file(scope.memory_dir, dt.date.today())
        text = read_project_text(path, root, max_bytes=MAX_JOURNAL_BYTES)
        return _framed(text, path.name, budget, f"Nothing is in today's journal ({path.name}) yet.")

    def recent() -> str:
        text = recent_memory(scope.memory_dir, files=3, root=root)
        return _framed(text, "recent journals", budget, "No journals yet.")

    readers: dict[str, tuple[str, Callable[[], str]]] = {
        "memsearch://journal/today": ("Today's journal of this project's memory.", today),
        "memsearch://journal/recent": ("The headings and bullets of the three newest journals.", recent),
    }
    for uri, name in RESOURCE_FILES.items():
        path = scope.memsearch_dir / name
        if path.is_file():
            readers[uri] = (f"{name}: kept current from the journals.", _file_reader(path, root, budget))
    return readers


def _file_reader(path: Path, root: Path, budget: Budget) -> Callable[[], str]:
    """The reader of one file's resource: a function of no arguments (the SDK refuses a resource
    whose handler takes parameters its URI does not name, defaulted ones included)."""
    from memsearch.engine.project_files import read_project_text

    def read() -> str:
        text = read_project_text(path, root)
        return _framed(text, path.name, budget, f"{path.name} is empty or cannot be read.")

    return read
