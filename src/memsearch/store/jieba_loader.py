"""Loading jieba's dictionary for Milvus Lite's BM25 analyzer: late, and only when Chinese needs it.

Milvus Lite tokenises ``content`` and every BM25 query in our process with jieba, and jieba loads
its whole dictionary (~500,000 words and prefixes; ~75 MB more memory as a dict, ~0.35-1.3 s) on
the first text it segments, Chinese or not. Most memories and queries have no Chinese, and for
text without a Han character jieba's result depends on a tiny part of that dictionary: the 56
entries (words and word prefixes) made only of the ASCII letters, digits and ``+#&._%-`` that
jieba segments alongside Han characters. :func:`prepare` installs just those
(:data:`NON_HAN_ENTRIES`, with the full dictionary's total) when jieba's default dictionary is the
one we know, and loads the full dictionary the first time a text with a Han character is
segmented. The tokens are the same either way (tests/test_jieba_loader.py compares them on the
benchmark corpus and on awkward strings); a different jieba version or a custom dictionary gets
the full dictionary at once.

This module owns both steps: the deferral and the full load, which gives jieba the same table in
compact form (``memsearch.store.jieba_dict``: ~9 MB instead of ~75 MB, read in milliseconds once built)
and leaves anything unexpected (a custom dictionary, an unreadable file) to jieba's own
initialisation.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger("memsearch.store")

#: The jieba release and default dictionary size :data:`NON_HAN_ENTRIES` was taken from.
KNOWN_JIEBA = ("0.42.1", 5_071_852)
#: The sum of all word frequencies in that dictionary (jieba scores routes against it).
KNOWN_TOTAL = 60_101_967
#: Every entry of that dictionary (words, and prefixes of words with frequency 0) without a Han
#: character: all jieba consults when it segments text that has none.
NON_HAN_ENTRIES: dict[str, int] = {
    **{"AT&T": 3, "c#": 3, "C#": 3, "c++": 3, "C++": 3},
    **dict.fromkeys(
        "A AT AT& B c C c+ C+ T AA AB BB BP CD CA CAL CALL D E F G H I IC IP K N O P PC PH S SI SIM "  # noqa: SIM905
        "U V VI VIS VISA Z Q QQ R RS RSS X γ 4 4S 4s 1".split(),
        0,
    ),
}
#: What jieba treats as a Han character (its ``re_han_default`` without the ASCII part).
HAN = re.compile("[\u4e00-\u9fd5]")

_lock = threading.Lock()


def prepare() -> None:
    """Ready jieba's default tokenizer before Milvus Lite's first tokenising call (see module doc)."""
    try:
        import jieba
    except ImportError:
        return
    with _lock:
        tokenizer = getattr(jieba, "dt", None)
        if tokenizer is None or getattr(tokenizer, "initialized", True):
            return
        if tokenizer.dictionary != jieba.DEFAULT_DICT or tokenizer.cache_file or tokenizer.tmp_dir:
            return
        if _defer(jieba, tokenizer):
            return
    load_full(tokenizer)


def _defer(jieba: Any, tokenizer: Any) -> bool:
    """Install the non-Han entries and a hook that loads the rest on the first Han text."""
    try:
        size = (Path(jieba.__file__).parent / "dict.txt").stat().st_size
    except OSError:
        return False
    if (getattr(jieba, "__version__", None), size) != KNOWN_JIEBA:
        return False
    original = type(tokenizer).get_DAG

    def get_dag(sentence: str) -> Any:
        if HAN.search(sentence) and tokenizer.__dict__.get("get_DAG") is get_dag:
            with _lock:
                if tokenizer.__dict__.get("get_DAG") is get_dag:
                    logger.debug("jieba: Han text, loading the full dictionary")
                    tokenizer.initialized = False
                    load_full(tokenizer)
                    del tokenizer.get_DAG
        return original(tokenizer, sentence)

    with tokenizer.lock:
        tokenizer.FREQ, tokenizer.total = dict(NON_HAN_ENTRIES), KNOWN_TOTAL
        tokenizer.get_DAG = get_dag
        tokenizer.initialized = True
    return True


def deferred() -> bool:
    """Whether jieba's full dictionary is still waiting for a Han text (for tests and stats)."""
    import sys

    jieba = sys.modules.get("jieba")
    return jieba is not None and "get_DAG" in getattr(jieba, "dt", object()).__dict__


def load_full(tokenizer: Any) -> None:
    """Give ``tokenizer`` jieba's default dictionary as a :class:`~memsearch.store.jieba_dict.CompactFreq`.

    The table is read from the temp folder (built from jieba's ``dict.txt`` the first time).
    When that fails, ``tokenizer.initialized`` stays false and jieba loads its own dictionary (a
    plain dict, ~75 MB) on the next text it segments.
    """
    try:
        import jieba

        from memsearch.store.jieba_dict import load

        with tokenizer.lock:
            if tokenizer.initialized:
                return
            table = load(Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME)
            tokenizer.FREQ, tokenizer.total = table, table.total
            tokenizer.initialized = True
    except Exception:  # an unreadable dictionary: jieba initialises itself on first use
        logger.debug("compact jieba dictionary skipped", exc_info=True)
