"""The OpenAI provider, also serving any OpenAI-compatible endpoint (vLLM, LM Studio, llama.cpp, ...).

This module owns the OpenAI SDK call (``AsyncOpenAI``, ``encoding_format="float"``), the
known-dimension table, and the translation of the SDK's exceptions into our typed errors.
``base_url`` comes from the argument, else ``OPENAI_BASE_URL``, else OpenAI itself; the key from the
argument, else ``OPENAI_API_KEY``. A key is required only for OpenAI's own endpoint: local
OpenAI-compatible servers usually take none, so they get a placeholder the SDK accepts.
The SDK retries at most once here (its default is twice, with back-off), so a dead endpoint fails
in about a second instead of stalling; ``timeout`` bounds a whole request, retry included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import openai

from memsearch.embeddings.base import CONNECT_TIMEOUT, ApiErrors, BatchingEmbedder, resolve_api_key

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Sent to OpenAI-compatible servers that take no key (the SDK refuses to run without one).
PLACEHOLDER_KEY = "memsearch-no-key"

OPENAI_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedding(BatchingEmbedder):
    provider_name = "openai"
    default_model = "text-embedding-3-small"
    default_batch_size = 256
    known_dimensions = OPENAI_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = ApiErrors("OpenAI", ("OPENAI_API_KEY",))
    #: Total deadline per request (the SDK's retry included), seconds; the ``timeout`` argument
    #: (``embedding.timeout``) overrides it for one instance.
    timeout: float = 60.0

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 0,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 0,
    ) -> None:
        super().__init__(model=model, batch_size=batch_size)
        if timeout and timeout > 0:
            self.timeout = timeout
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL", "").strip() or DEFAULT_BASE_URL
        ).rstrip("/")
        self.custom_endpoint = self.base_url != DEFAULT_BASE_URL
        if self.custom_endpoint:
            self.errors = ApiErrors("OpenAI-compatible", ("OPENAI_API_KEY",))
        key = resolve_api_key(api_key, self.errors, required=not self.custom_endpoint)
        self._api_key = key or PLACEHOLDER_KEY

    @property
    def cache_namespace(self) -> str:
        # The same model name on another server may be another model.
        suffix = f"@{self.base_url}" if self.custom_endpoint else ""
        return f"{super().cache_namespace}{suffix}"

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        # One client per call: it is bound to the running event loop, and closing it here leaves no
        # sockets behind for the garbage collector.
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=1,
            timeout=openai.Timeout(self.timeout, connect=CONNECT_TIMEOUT),
        )
        try:
            yield client
        finally:
            await client.close()

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        url = f"{self.base_url}/embeddings"
        with sdk_errors(self.errors, url, self.timeout):
            # The SDK's timeout is per attempt and it retries a timeout, so a server that accepts and
            # never answers would hold us twice as long; wait_for makes self.timeout the total.
            response = await asyncio.wait_for(
                conn.embeddings.create(input=texts, model=self._model, encoding_format="float"),
                timeout=self.timeout,
            )
        if isinstance(response, (str, bytes)):  # the SDK hands back a body it could not decode
            raise self.errors.bad_response(url, f"not JSON ({str(response)[:80]!r})")
        try:
            items = sorted(response.data, key=lambda item: item.index)
            return [list(map(float, item.embedding)) for item in items]
        except (AttributeError, TypeError, ValueError) as exc:
            raise self.errors.bad_response(url, f"no embeddings where expected ({exc!r})") from None


@contextlib.contextmanager
def sdk_errors(errors: ApiErrors, url: str, timeout: float) -> Iterator[None]:
    """Turn the openai SDK's exceptions (embeddings here, chat completions in ``llm.py``) into
    memsearch's one-line errors for ``url``."""
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
