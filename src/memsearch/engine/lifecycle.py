"""When a memory lets its embedding model go: one policy, :class:`ModelLifecycle`, chosen once.

Why: a local model costs ~80 MB and its working buffers, and loading it costs ~0.1–0.4 s. Who
holds the memory decides which matters: a program keeps it (it searches again soon), a command
that embeds once and then works on the store (a CLI search or index, a hook) drops it as soon as
the last text is embedded, so it is free before Milvus Lite's own peak (BM25, flush), and the
memory service keeps it warm between requests but frees it once nobody has asked for a while
(:class:`IdleRelease`). The policy is chosen where the memory is made (``MemSearch`` for a program,
``memory.open_memory`` for a command, ``core.engine`` for the service); the indexer and the hybrid
search ask it, nothing else carries a flag. Standard library only.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

__all__ = [
    "DEFAULT_MODEL_IDLE_SECONDS",
    "MODEL_IDLE_ENV",
    "IdleRelease",
    "ModelLifecycle",
    "model_idle_seconds",
]

#: Seconds the memory service keeps a model nobody uses. Five minutes: an agent session asks at
#: every prompt (a minute or two apart), so the model stays warm while someone works, and a
#: service left running overnight (``memsearch serve``, a long ``watch``) gives its ~80 MB back.
DEFAULT_MODEL_IDLE_SECONDS = 300.0
#: Sets :data:`DEFAULT_MODEL_IDLE_SECONDS` for a service (seconds).
MODEL_IDLE_ENV = "MEMSEARCH_MODEL_IDLE_SECONDS"


class ModelLifecycle(enum.Enum):
    """How long a memory keeps its embedding model once loaded."""

    #: Until ``close()``: a program's long-lived ``MemSearch``.
    KEEP = "keep"
    #: Dropped as soon as this run is done embedding: a CLI command or a hook, which then exits.
    ONE_SHOT = "one-shot"
    #: Kept between requests, dropped after :func:`model_idle_seconds` without any: the memory
    #: service's engines (its :class:`IdleRelease` watches them).
    IDLE = "idle"

    @property
    def drops_after_use(self) -> bool:
        """Whether a run lets the model go as soon as it has embedded its last text."""
        return self is ModelLifecycle.ONE_SHOT


def model_idle_seconds() -> float:
    """Seconds an :attr:`ModelLifecycle.IDLE` model is kept unused (``MEMSEARCH_MODEL_IDLE_SECONDS``)."""
    from memsearch.config.envvars import env_number

    return float(env_number(MODEL_IDLE_ENV) or DEFAULT_MODEL_IDLE_SECONDS)


class IdleRelease:
    """A thread that calls ``release()`` once ``idle_seconds()`` (time since the last use) reaches
    the idle limit, once per spell of use: the memory service's half of :attr:`ModelLifecycle.IDLE`.
    A model in use is never taken from under a request: releasing drops this process's cached
    session, and a request that holds it finishes with it (the next one loads it again)."""

    def __init__(
        self, idle_seconds: Callable[[], float], release: Callable[[], None], limit: float | None = None
    ):
        self._idle_seconds = idle_seconds
        self._release = release
        self.limit = model_idle_seconds() if limit is None else limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memsearch-service-model-idle", daemon=True)

    def start(self) -> IdleRelease:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        released = False
        while not self._stop.wait(min(5.0, max(self.limit / 4, 0.05))):
            idle = self._idle_seconds()
            if idle < self.limit:
                released = False  # used since: release again after the next quiet spell
            elif not released:
                released = True
                self._release()
