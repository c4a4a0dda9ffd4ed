"""How a ``MemSearch`` operation reaches the store's owner without an event loop it does not need.

Why: every public operation of ``MemSearch`` runs where the store's owner is
(``memsearch.service.owner``): here, or as one request to the process that owns the store. A
request blocks on a socket and never suspends, so a synchronous caller (the CLI, a hook) can drive
such a coroutine to its end without starting asyncio (30 ms of a routed ``memsearch search``).
:func:`at_owner` marks the operations; :data:`LOOPLESS` lets ``MemSearch.run`` recognise them.
Standard library only, and it imports nothing of the engine (``memsearch.core`` imports it).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: The code of the coroutines ``MemSearch.run`` may drive without an event loop.
LOOPLESS: set[Any] = set()


#: The answer of ``memsearch.service.owner.call`` that says "run it in this process".
HERE: Any = object()


def at_owner(method: F) -> F:
    """Run a public operation where the store's owner is: ``self._remote(name, args, kwargs)``
    answers it at the owner, or says :data:`HERE`, and then the method runs in this process.

    A coroutine operation answered remotely never suspends; when it runs here after all while it is
    driven without a loop (this process took the store over), it starts one for the local work.
    """
    name = method.__name__
    if not inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            answer = self._remote(name, args, kwargs)
            return method(self, *args, **kwargs) if answer is HERE else answer

        return call  # type: ignore[return-value]

    @functools.wraps(method)
    async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = self._remote(name, args, kwargs)
        if answer is not HERE:
            return answer
        if not loop_running():
            import asyncio

            return asyncio.run(method(self, *args, **kwargs))
        return await method(self, *args, **kwargs)

    LOOPLESS.add(call_async.__code__)  # type: ignore[attr-defined]  # (wraps keeps the function)
    return call_async  # type: ignore[return-value]


def loop_running() -> bool:
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and asyncio._get_running_loop() is not None
