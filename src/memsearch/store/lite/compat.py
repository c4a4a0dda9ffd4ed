"""Which milvus-lite and NumPy the fast search path was verified on, and whether this process has them.

Why: :mod:`memsearch.store.lite.fast_search` reproduces milvus-lite's search from its private
members and internal modules, so it is only right on the releases ``tests/test_lite_search.py``
compared it with (3.2.0 and 3.2.1 lack ``Collection.resolve_search_metric``; a later patch may
change an internal). :data:`MILVUS_LITE_RANGE` and :data:`NUMPY_RANGE` are the one statement of
that range: ``pyproject.toml`` pins the same bounds (a test checks they agree), this gate refuses
anything else, and ``evaluation/lite_drift.py`` re-runs the comparison on the newest release.

When the fast path is off (another release, NumPy 1, or a failure at run time) the engine's own
search answers, right but several times slower; that is said once per process at WARNING level,
and ``memsearch stats`` shows the state of the process that owns the store (:func:`state_line`).
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("memsearch.store")

#: milvus-lite releases the fast path was verified on: lowest included, first excluded.
MILVUS_LITE_RANGE = ("3.2.2", "3.2.3")
#: NumPy releases it was verified on (NumPy 2's scalar promotion, NEP 50, is what makes the array
#: arithmetic and the engine's per-row arithmetic agree).
NUMPY_RANGE = ("2.0.2", "3")

COST = "searches use the engine's own search instead: same results, several times slower"

_lock = threading.Lock()
_decided: tuple[bool, str] | None = None
_failures = 0
_last_failure = ""
_warned = False


def _version_key(version: str) -> tuple[int, ...]:
    """``"3.2.2"`` -> (3, 2, 2); a pre-release or local part ends the key (``"3.3.0rc1"`` -> (3, 3, 0))."""
    key = []
    for part in version.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        key.append(int(digits))
        if digits != part:
            break
    return tuple(key)


def in_range(version: str, bounds: tuple[str, str]) -> bool:
    """Whether ``version`` is at least ``bounds[0]`` and below ``bounds[1]``."""
    key = _version_key(version)
    return _version_key(bounds[0]) <= key < _version_key(bounds[1])


def _installed(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _decide() -> tuple[bool, str]:
    lite, numpy = _installed("milvus-lite"), _installed("numpy")
    low, high = MILVUS_LITE_RANGE
    if lite is None:
        return False, "milvus-lite is not installed"
    if not in_range(lite, MILVUS_LITE_RANGE):
        return False, f"milvus-lite {lite} is outside the verified range {low} to below {high}"
    if numpy is None or not in_range(numpy, NUMPY_RANGE):
        return (
            False,
            f"NumPy {numpy} is outside the verified range {NUMPY_RANGE[0]} to below {NUMPY_RANGE[1]}",
        )
    return True, f"milvus-lite {lite}"


def decision() -> tuple[bool, str]:
    """(on, why): whether the installed milvus-lite and NumPy are in the verified range (cached)."""
    global _decided
    if _decided is None:
        _decided = _decide()
    return _decided


def supported() -> bool:
    """Whether the fast path may run in this process; the first "no" warns (see :func:`warn_off`)."""
    on, why = decision()
    if not on:
        warn_off(why)
    return on


def warn_off(why: str) -> None:
    """One WARNING line per process: the fast path is off, why, and what it costs."""
    _warn_once(f"Milvus Lite fast search path off: {why}; {COST}")


def failed(exc: BaseException) -> None:
    """A fast-path failure at run time (the engine answered that call): counted for ``stats``, and
    warned once per process. A filter the engine's own parser refuses is the caller's mistake, not
    the fast path's: the engine answers it with the same error, and nothing is counted."""
    global _failures, _last_failure
    if _is_filter_error(exc):
        return
    with _lock:
        _failures += 1
        _last_failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
    logger.debug("the fast search path failed; the engine answers", exc_info=exc)
    _warn_once(
        f"Milvus Lite fast search path failed ({_last_failure}); the engine's own search answered: "
        "same results, several times slower (`memsearch stats` counts the failures)"
    )


def _is_filter_error(exc: BaseException) -> bool:
    try:
        from milvus_lite.search.filter.exceptions import FilterError
    except ImportError:  # another milvus-lite layout: count it (the drift check will say why)
        return False
    return isinstance(exc, FilterError)


def _warn_once(line: str) -> None:
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    logger.warning("%s", line)


def state_line() -> str:
    """The fast path's state in this process, one line for ``memsearch stats``."""
    on, why = decision()
    if not on:
        return f"Lite fast path: off: {why} ({COST})"
    if _failures:
        return (
            f"Lite fast path: on ({why}), but it failed {_failures} time{'s' if _failures != 1 else ''} "
            f"in this process, the last: {_last_failure}"
        )
    return f"Lite fast path: on ({why})"
