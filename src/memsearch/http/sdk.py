"""The openai SDK: one ``AsyncOpenAI`` client per event loop (closed with its loop), and its
exceptions turned into memsearch's one-line errors. ``openai`` is imported only when used."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Iterator
from typing import TYPE_CHECKING

from memsearch.http.wording import CONNECT_TIMEOUT, PLACEHOLDER_KEY, ApiErrors

if TYPE_CHECKING:
    import openai

# --- the openai SDK -----------------------------------------------------------------------------


def openai_client(api_key: str | None, base_url: str, timeout: float) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client as every caller here wants it: at most one retry (the SDK's default
    is two, with back-off, so a dead endpoint would stall), ``timeout`` per attempt and
    :data:`CONNECT_TIMEOUT` to connect, and a placeholder key for servers that take none."""
    import openai

    return openai.AsyncOpenAI(
        api_key=api_key or PLACEHOLDER_KEY,
        base_url=base_url,
        max_retries=1,
        timeout=openai.Timeout(timeout, connect=CONNECT_TIMEOUT),
    )


class OpenAIClients:
    """One ``AsyncOpenAI`` client per event loop, kept across calls (its connections with it).

    An asyncio client belongs to the loop it was first used on, so a call from another loop gets a
    client of its own, and a loop that is gone never has its dead client reused. Each client is
    closed with its loop: a small async generator started on that loop is finalised by the loop's
    shutdown (``asyncio.run``, ``asyncio.Runner`` and the watcher's loop all shut their async
    generators down), and closes the client there, on the right loop. :meth:`close` closes them
    all earlier.
    """

    def __init__(self, api_key: str | None, base_url: str, timeout: float) -> None:
        self._args = (api_key, base_url, timeout)
        self._clients: dict[asyncio.AbstractEventLoop, _LoopClient] = {}
        self._lock = threading.Lock()

    async def get(self) -> openai.AsyncOpenAI:
        """The client of the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for other in [other for other in self._clients if other.is_closed()]:
                self._clients.pop(other).abandon()
            entry = self._clients.get(loop)
        if entry is None:
            entry = _LoopClient(openai_client(*self._args))
            await entry.bind()
            with self._lock:
                self._clients[loop] = entry
        return entry.client

    def close(self) -> None:
        """Close every client, each on its own loop (waiting for it unless that loop is the caller's:
        from a coroutine, prefer :meth:`aclose`)."""
        for loop, entry in self._take_all():
            entry.close_on(loop)

    async def aclose(self) -> None:
        """Close every client; the running loop's now, before returning."""
        running = asyncio.get_running_loop()
        for loop, entry in self._take_all():
            if loop is running:
                await entry.aclose()
            else:
                entry.close_on(loop)

    def _take_all(self) -> list[tuple[asyncio.AbstractEventLoop, _LoopClient]]:
        with self._lock:
            entries = list(self._clients.items())
            self._clients.clear()
        return entries


class _LoopClient:
    """A client and the async generator that closes it when its loop shuts down."""

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client
        self._closed = False
        self._closer = self._close_at_shutdown()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self._close_client()

    async def _close_client(self) -> None:
        if not self._closed:  # once, whoever comes first: close() or the loop's shutdown
            self._closed = True
            await self.client.close()

    async def bind(self) -> None:
        """Start the closer on the running loop, which registers it for that loop's shutdown."""
        await self._closer.__anext__()

    async def aclose(self) -> None:
        await self._close_client()
        self.abandon()

    def abandon(self) -> None:
        """Finish the closer without running it on a loop: the client is closed, or its loop closed
        without shutting its generators down (the client's sockets went with that loop)."""
        self._closed = True
        with contextlib.suppress(StopIteration, RuntimeError):
            self._closer.aclose().send(None)

    def close_on(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop.is_closed():
            self.abandon()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # a sync close() from a coroutine on that loop: close soon, there
            task = loop.create_task(self.aclose())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif loop.is_running():  # another thread's loop (the memory service's)
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(CONNECT_TIMEOUT)
        else:
            loop.run_until_complete(self.aclose())


@contextlib.contextmanager
def sdk_errors(errors: ApiErrors, url: str, timeout: float) -> Iterator[None]:
    """Turn the openai SDK's exceptions (embeddings, chat completions) into memsearch's one-line
    errors for ``url``."""
    import openai

    try:
        yield
    except (openai.APITimeoutError, asyncio.TimeoutError):
        raise errors.timed_out(url, timeout) from None
    except openai.APIConnectionError as exc:
        raise errors.unreachable(url, _cause_text(exc)) from None
    except openai.APIStatusError as exc:
        raise errors.http_status(url, exc.status_code, _body_text(exc)) from None
    except (openai.OpenAIError, ValueError) as exc:
        raise errors.bad_response(url, str(exc) or type(exc).__name__) from None


def _cause_text(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        if isinstance(cause, ConnectionRefusedError):
            break
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return str(cause or exc) or type(exc).__name__


def _body_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text
    except Exception:  # the response body may not be readable any more
        return str(exc.message)
