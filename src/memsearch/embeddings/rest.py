"""The base class of the REST providers: one JSON POST per batch, through :mod:`memsearch.http`.

This module owns :class:`RestEmbedder` (endpoint, request and answer shape for ollama, google,
voyage, jina and mistral). The transport, its deadlines and its error wording are
:func:`memsearch.http.post_json`'s, shared with the LLM backends and the remote reranker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from memsearch.embeddings.base import RemoteEmbedder, RemoteOptions
from memsearch.http import JsonClient

if TYPE_CHECKING:
    from typing_extensions import Unpack


class RestEmbedder(RemoteEmbedder):
    """A provider whose API is one JSON POST per batch.

    Subclasses name the endpoint (:meth:`_url`), the request (:meth:`_body`) and where the vectors
    are in the answer (:meth:`_vectors`; the default reads the OpenAI-style ``data[i].embedding``).
    ``base_url`` is the vendor's public API root unless the caller gives another one (a proxy, a
    self-hosted gateway, or a fake server in tests). The provider keeps its connection open between
    requests (HTTP keep-alive) until :meth:`close`.
    """

    def __init__(self, **options: Unpack[RemoteOptions]) -> None:
        self._http = JsonClient()
        super().__init__(**options)

    def close(self) -> None:
        self._http.close()

    def _url(self) -> str:
        return f"{self.base_url}/embeddings"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self._model, "input": texts}

    def _vectors(self, payload: Any) -> list[list[float]]:
        items = sorted(payload["data"], key=lambda item: item.get("index", 0))
        return [list(map(float, item["embedding"])) for item in items]

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        url = self._url()
        payload = await asyncio.to_thread(
            self._http.post_json,
            url,
            self._body(texts, query=query),
            headers=self._headers(),
            errors=self.errors,
            timeout=self.timeout,
        )
        try:
            return self._vectors(payload)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise self.errors.bad_response(url, f"no embeddings where expected ({exc!r})") from None
