"""What a ``memsearch`` process leaves unimported: pandas, which nothing here uses.

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
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
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
