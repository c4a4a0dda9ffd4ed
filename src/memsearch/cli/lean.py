"""What a ``memsearch`` process does not load: pandas, jieba's pkg_resources, mimalloc's reserve.

Milvus Lite reads its segments with ``pyarrow.parquet``, which imports ``pyarrow.dataset``, whose
module initialisation asks pyarrow's pandas shim whether pandas is installed, and the shim answers
by importing it: ~0.25 s (seconds on a busy machine) and ~33 MB in every CLI search, index and hook
that opens a Lite store, for a library no code path of ours calls. pyarrow treats a pandas that
cannot be imported as absent and works the same without it.

jieba (the BM25 analyzer's tokenizer, imported whenever a Lite store opens) tries
``import pkg_resources`` at import only to locate its own dictionary file, and falls back to the
file beside its module when that fails. pkg_resources scans every installed distribution when it
is imported: ~0.2-0.4 s and ~9 MB (``import jieba``: 0.23-0.46 s and 17 MB with it, 0.05-0.07 s
and 8 MB without, measured here). memsearch never asks jieba for that file (the dictionary comes
from ``memsearch.store.jieba_dict``), and the fallback finds the same file when jieba does.

:class:`LeanImports` is an import finder that refuses both: ``pandas`` while pymilvus is not
loaded (pymilvus, for a Milvus server URI, needs pandas at import, so once it is being imported,
pandas imports normally), and ``pkg_resources`` only while jieba's ``_compat`` module is being
executed (any other importer gets it). Only the console entry point installs it, for the process
it owns; library users' processes (``from memsearch import MemSearch``) are left as they are.

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
from collections.abc import Callable, Sequence
from types import ModuleType


def _jieba_compat_running() -> bool:
    """Whether jieba's ``_compat`` module is executing now (imported, not yet initialised)."""
    compat = sys.modules.get("jieba._compat")
    return compat is not None and not hasattr(compat, "get_module_res")


#: module name -> when a memsearch process refuses to import it (see the module docstring).
REFUSED: dict[str, tuple[str, Callable[[], bool]]] = {
    "pandas": ("pandas is not loaded by the memsearch command", lambda: "pymilvus" not in sys.modules),
    "pkg_resources": ("jieba finds its files without pkg_resources", _jieba_compat_running),
}


class LeanImports(importlib.abc.MetaPathFinder):
    """Refuses the imports of :data:`REFUSED` while their condition holds."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        refused = REFUSED.get(fullname)
        if refused is not None and refused[1]():
            raise ModuleNotFoundError(refused[0], name=fullname)
        return None


def keep_imports_lean() -> None:
    """Install :class:`LeanImports` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, LeanImports) for f in sys.meta_path):
        sys.meta_path.insert(0, LeanImports())


def lean_process() -> None:
    """Everything this module does, for the console entry point (before any command runs)."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    keep_imports_lean()
