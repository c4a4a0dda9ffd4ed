"""The scale bench's row counter: how many rows a command read from its Milvus Lite store.

Put on ``PYTHONPATH`` by ``evaluation/scale.py`` for one counting run of a command (never for a
timed run), in both tools' interpreters: with ``MEMSEARCH_SCALE_ROWS`` naming a file, the rows
milvus-lite's engine hands back to the caller (``Collection.query``, ``get`` and ``search``; a
``count(*)`` counts the rows it walks) are added up and written there as JSON when the process
exits. It wraps the engine, which both tools share (the original reaches it through pymilvus),
never memsearch's own code. Without the variable it does nothing and imports nothing.
"""

from __future__ import annotations

import os

_OUT = os.environ.get("MEMSEARCH_SCALE_ROWS")

if _OUT:
    import atexit
    import functools
    import json
    from typing import Any

    _counts = {"rows": 0, "calls": 0}

    def _rows(result: Any) -> int:
        if isinstance(result, list):
            return sum(len(r) if isinstance(r, list) else 1 for r in result)
        return 1 if result is not None else 0

    def _wrap(cls: Any, name: str, walked: bool = False) -> None:
        original = getattr(cls, name)
        if isinstance(original, property):
            getter = original.fget

            def counted_property(self: Any) -> Any:
                value = getter(self)
                _counts["calls"] += 1
                _counts["rows"] += int(value)
                return value

            setattr(cls, name, property(counted_property))
            return

        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            _counts["calls"] += 1
            _counts["rows"] += _rows(result)
            return result

        setattr(cls, name, counted)

    def _install() -> None:
        from milvus_lite.engine.collection import Collection

        for name in ("query", "get", "search"):
            _wrap(Collection, name)
        _wrap(Collection, "num_entities")

    def _write() -> None:
        with open(_OUT, "w") as fh:
            json.dump(_counts, fh)

    try:
        _install()
        atexit.register(_write)
    except Exception:  # no milvus-lite here: nothing to count
        pass
