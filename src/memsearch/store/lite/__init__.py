"""Milvus Lite in this process: the one package that touches milvus-lite's internals.

Everything that imports ``milvus_lite`` lives here (a test checks no other module of memsearch
does), behind this face:

- :class:`LiteClient` (``client``): a Lite database directory as a
  :class:`~memsearch.store.driver.StoreDriver`, the store's typed driver interface;
- ``fast_search``: the NumPy search that gives the engine's exact answers without its per-row loops,
  which reads the engine's private members;
- ``compat``: the milvus-lite and NumPy releases that search was verified on
  (:data:`MILVUS_LITE_RANGE`, :data:`NUMPY_RANGE`, pinned the same in ``pyproject.toml``), the gate
  that turns it off elsewhere with one warning, and its state for ``memsearch stats``
  (:func:`fast_path_line`).
"""

from memsearch.store.lite.client import LiteClient
from memsearch.store.lite.compat import MILVUS_LITE_RANGE, NUMPY_RANGE
from memsearch.store.lite.compat import state_line as fast_path_line

__all__ = ["MILVUS_LITE_RANGE", "NUMPY_RANGE", "LiteClient", "fast_path_line"]
