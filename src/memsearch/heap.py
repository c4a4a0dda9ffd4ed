"""Giving freed memory back to the system in a long-lived process (glibc only; a no-op elsewhere).

Why: a process that is done with its model (``memsearch.models.onnx_runtime.release``) has just
freed ~100 MB that glibc would keep, and the memory service lives for hours. While it indexes,
onnxruntime, numpy, tokenizers and Milvus Lite allocate and free hundreds of MB on several
threads; glibc serves each thread from its own malloc arena (up to 8 per core) and keeps what was
freed there instead of returning it, so the process's RSS stays at the high-water mark of its
busiest moment. :func:`limit_arenas` caps the arenas (fewer, fuller arenas leave less free memory
stranded) and :func:`trim` returns the free pages of every arena (``malloc_trim(0)``). Both are
called through ctypes on the C library already loaded; on a platform without them (macOS, musl)
they do nothing and say so by returning False. Measured figures are in evaluation/README.md (Soak).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys
import threading

logger = logging.getLogger("memsearch.heap")

#: ``mallopt`` parameter number of ``M_ARENA_MAX`` in glibc's malloc.h.
_M_ARENA_MAX = -8
#: Arenas a service's threads share (glibc's default allows 8 per core; the soak: ~30 MB less RSS).
SERVICE_ARENAS = 2


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    return libc


def limit_arenas(arenas: int = SERVICE_ARENAS) -> bool:
    """Cap glibc's malloc arenas for threads started from now on (``MALLOC_ARENA_MAX``, set from
    inside: the variable itself is read only when the process starts). Call before the threads."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, arenas))


def trim() -> bool:
    """Return every arena's free pages to the system; True if glibc released any."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return bool(libc.malloc_trim(0))
    except OSError:  # pragma: no cover - a libc without the symbol was refused above
        logger.debug("malloc_trim failed", exc_info=True)
        return False


def trim_every(seconds: float, stop: threading.Event) -> threading.Thread | None:
    """A daemon thread that calls :func:`trim` every ``seconds`` until ``stop`` is set (None where
    there is nothing to trim). For a process whose work comes in bursts at any time (a service):
    each trim takes a few ms and returns what the last burst freed, whoever freed it."""
    if _glibc() is None:
        return None

    def loop() -> None:
        while not stop.wait(seconds):
            trim()

    thread = threading.Thread(target=loop, name="memsearch-service-heap-trim", daemon=True)
    thread.start()
    return thread
