"""The BM25 analyzer of the ``content`` field, and jieba prepared in this process for Milvus Lite.

A new collection segments Chinese with jieba when the ``jieba`` package is installed (``"auto"``);
an existing collection keeps the analyzer it was created with. Milvus Lite tokenises in our own
process, so this module also keeps jieba's start-up fast and quiet there.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from typing import Any

from memsearch import errors

logger = logging.getLogger(__name__)


#: Analyzer params per explicit analyzer name. ``lowercase`` keeps English matching
#: case-insensitive on Milvus server, whose jieba tokenizer does not lowercase (milvus-lite's does,
#: and ignores the filter). ``None`` = the standard analyzer, as in the original.
ANALYZERS: dict[str, dict[str, Any] | None] = {
    "standard": None,
    "jieba": {"tokenizer": "jieba", "filter": ["lowercase"]},
}
#: Every value the ``analyzer`` argument accepts ("auto" = jieba when installed, else standard).
ANALYZER_CHOICES = ("auto", *ANALYZERS)


def default_analyzer_params() -> dict[str, Any] | None:
    """Analyzer for ``content`` in a new collection: jieba (segments Chinese) when installed."""
    if importlib.util.find_spec("jieba") is None:
        return ANALYZERS["standard"]
    return ANALYZERS["jieba"]


def analyzer_params_for(name: str, *, local: bool) -> dict[str, Any] | None:
    """The analyzer params for ``name`` (``"auto"``, ``"standard"`` or ``"jieba"``).

    Choosing explicitly lets an evaluation compare analyzers on the same machine. Milvus Lite runs
    jieba in this process, so ``"jieba"`` on Lite needs the ``jieba`` package; a server brings its own.
    """
    if name == "auto":
        return default_analyzer_params()
    if name not in ANALYZERS:
        raise errors.ConfigValueError(
            f"Unknown BM25 analyzer '{name}'. Valid: {', '.join(ANALYZER_CHOICES)}",
            hint="use 'auto' (jieba when installed), 'standard' or 'jieba'",
        )
    if name == "jieba" and local and importlib.util.find_spec("jieba") is None:
        raise errors.ConfigValueError(
            "The jieba BM25 analyzer needs the 'jieba' package with Milvus Lite, and it is not installed",
            hint="pip install jieba, or choose the 'standard' analyzer",
        )
    return ANALYZERS[name]


def analyzer_name(params: dict[str, Any]) -> str:
    raw = params.get("analyzer_params")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    if not isinstance(raw, dict):
        return "standard"
    tokenizer = raw.get("tokenizer") or raw.get("type") or "standard"
    if isinstance(tokenizer, dict):
        tokenizer = tokenizer.get("type", "standard")
    return str(tokenizer)


class _BelowWarningFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


#: jieba logs "Building prefix dict ..." at DEBUG through its own stderr handler whenever it loads;
#: Milvus Lite runs jieba in our process, so that would land in the CLI's output. A filter on its
#: logger survives jieba's import (which resets the level) and needs no import of jieba.
JIEBA_QUIET = _BelowWarningFilter()


def prepare_jieba() -> None:
    """Before Milvus Lite's first tokenising call: jieba's dictionary, late (memsearch.store.jieba_loader)."""
    from memsearch.store.jieba_loader import prepare

    prepare()
