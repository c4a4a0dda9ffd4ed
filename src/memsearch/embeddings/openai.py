"""The OpenAI provider, also serving any OpenAI-compatible endpoint (vLLM, LM Studio, llama.cpp, ...).

This module owns the OpenAI SDK call (``AsyncOpenAI``, ``encoding_format="float"``), the
known-dimension table, and the translation of the SDK's exceptions into our typed errors.
``base_url`` comes from the argument, else ``OPENAI_BASE_URL``, else OpenAI itself; the key from the
argument, else ``OPENAI_API_KEY``. A key is required only for OpenAI's own endpoint: local
OpenAI-compatible servers usually take none, so they get a placeholder the SDK accepts.
The client is :func:`memsearch.http.openai_client` (at most one retry, a short connect timeout) and
its exceptions are translated by :func:`memsearch.http.sdk_errors`, both shared with ``llm.py``;
``timeout`` bounds a whole request, retry included.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from memsearch.callerenv import getenv
from memsearch.embeddings.base import EmbeddingErrors, RemoteEmbedder
from memsearch.http import ApiErrors, OpenAIClients, sdk_errors

DEFAULT_BASE_URL = "https://api.openai.com/v1"

OPENAI_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedding(RemoteEmbedder):
    provider_name = "openai"
    default_model = "text-embedding-3-small"
    default_batch_size = 256
    default_base_url = DEFAULT_BASE_URL
    known_dimensions = OPENAI_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("OpenAI", ("OPENAI_API_KEY",))

    def _resolve_base_url(self, base_url: str | None) -> str:
        return base_url or getenv("OPENAI_BASE_URL").strip() or DEFAULT_BASE_URL

    def _configure(self, *, base_url: str | None, api_key: str | None) -> None:
        self.custom_endpoint = self.base_url != DEFAULT_BASE_URL
        if self.custom_endpoint:
            self.errors = EmbeddingErrors("OpenAI-compatible", ("OPENAI_API_KEY",))

    def _requires_key(self) -> bool:
        return not self.custom_endpoint

    @property
    def cache_namespace(self) -> str:
        # The same model name on another server may be another model.
        suffix = f"@{self.base_url}" if self.custom_endpoint else ""
        return f"{super().cache_namespace}{suffix}"

    def _configured(self, *, base_url: str | None, api_key: str | None) -> None:
        self._clients = OpenAIClients(self.api_key, self.base_url, self.timeout)

    def close(self) -> None:
        self._clients.close()

    async def aclose(self) -> None:
        await self._clients.aclose()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        # The running loop's client, kept (with its connection) across calls: building one per call
        # cost a client, an SSL context and a TCP (or TLS) handshake per search.
        yield await self._clients.get()

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
