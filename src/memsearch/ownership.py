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
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: The code of the coroutines ``MemSearch.run`` may drive without an event loop.
LOOPLESS: set[Any] = set()


def here() -> Any:
    """The answer that says "run it in this process" (``memsearch.service.owner.HERE``)."""
    from memsearch.service.owner import HERE

    return HERE


def at_owner(method: F) -> F:
    """Run a public operation where the store's owner is: ``self._remote(name, args, kwargs)``
    answers it at the owner, or says :func:`here`, and then the method runs in this process.

    A coroutine operation answered remotely never suspends; when it runs here after all while it is
    driven without a loop (this process took the store over), it starts one for the local work.
    """
    name = method.__name__
    if not inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            answer = self._remote(name, args, kwargs)
            return method(self, *args, **kwargs) if answer is here() else answer

        return call  # type: ignore[return-value]

    @functools.wraps(method)
    async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = self._remote(name, args, kwargs)
        if answer is not here():
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


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a memsearch coroutine suspended outside an event loop")
