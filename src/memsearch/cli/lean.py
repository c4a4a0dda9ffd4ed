"""What a ``memsearch`` process does not load: pandas, and mimalloc's reserve for pyarrow.

Milvus Lite reads its segments with ``pyarrow.parquet``, which imports ``pyarrow.dataset``, whose
module initialisation asks pyarrow's pandas shim whether pandas is installed, and the shim answers
by importing it: ~0.25 s (seconds on a busy machine) and ~33 MB in every CLI search, index and hook
that opens a Lite store, for a library no code path of ours calls. pyarrow treats a pandas that
cannot be imported as absent and works the same without it.

:func:`keep_pandas_out` installs an import finder that answers ``import pandas`` with
``ModuleNotFoundError`` while pymilvus is not loaded. pymilvus (a Milvus server URI) needs pandas at
import, so once it is being imported, pandas imports normally. Only the console entry point
installs it, for the process it owns; library users' processes (``from memsearch import
MemSearch``) are left as they are.

The same entry point sets ``ARROW_DEFAULT_MEMORY_POOL=system`` (unless the user set it): pyarrow's
default pool, mimalloc, keeps what Milvus Lite's parquet reads allocated as its own reserve, ~25 MB
more resident memory for a search on a 2,000-chunk store than the C library's allocator (measured
with the same search, 239 against 213 MB). The variable is read when pyarrow first creates its
pool, so it is set before anything imports pyarrow, and the memory service and hooks a command
starts inherit it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType


class PandasBlocker(importlib.abc.MetaPathFinder):
    """Refuses ``pandas`` until pymilvus is imported (see the module docstring)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas" and "pymilvus" not in sys.modules:
            raise ModuleNotFoundError("pandas is not loaded by the memsearch command", name="pandas")
        return None


def keep_pandas_out() -> None:
    """Install :class:`PandasBlocker` first on ``sys.meta_path`` (once; a no-op if pandas is loaded)."""
    if "pandas" in sys.modules or any(isinstance(f, PandasBlocker) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, PandasBlocker())


def lean_process() -> None:
    """Everything this module does, for the console entry point (before any command runs)."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    keep_pandas_out()
