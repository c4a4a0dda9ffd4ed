"""The Voyage AI provider (``POST {base}/embeddings``, OpenAI-shaped answer).

This module owns the known-dimension table and the ``input_type`` Voyage uses to embed queries and
documents differently. The key comes from ``api_key`` or ``VOYAGE_API_KEY``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from memsearch.embeddings.base import EmbeddingErrors
from memsearch.embeddings.rest import RestEmbedder
from memsearch.http import ApiErrors

VOYAGE_DIMENSIONS: dict[str, int] = {
    "voyage-4-large": 1024,
    "voyage-4": 1024,
    "voyage-4-lite": 1024,
    "voyage-3.5": 1024,
    "voyage-3.5-lite": 1024,
    "voyage-3-large": 1024,
    "voyage-3": 1024,
    "voyage-code-3": 1024,
    "voyage-3-lite": 512,
}

INPUT_TYPES = {False: "document", True: "query"}


class VoyageEmbedding(RestEmbedder):
    provider_name = "voyage"
    default_model = "voyage-3-lite"
    default_batch_size = 128
    default_base_url = "https://api.voyageai.com/v1"
    known_dimensions = VOYAGE_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("Voyage AI", ("VOYAGE_API_KEY",))

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self._model, "input": texts, "input_type": INPUT_TYPES[query]}
