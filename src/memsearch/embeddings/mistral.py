"""The Mistral provider (``POST {base}/embeddings``, OpenAI-shaped request and answer).

This module owns the known-dimension table; the key comes from ``api_key`` or ``MISTRAL_API_KEY``.
Mistral's embedding models take no query/document distinction.
"""

from __future__ import annotations

from typing import ClassVar

from memsearch.embeddings.base import EmbeddingErrors
from memsearch.embeddings.rest import RestEmbedder
from memsearch.http import ApiErrors

MISTRAL_DIMENSIONS: dict[str, int] = {
    "mistral-embed": 1024,
    "codestral-embed": 1536,
    "codestral-embed-2505": 1536,
}


class MistralEmbedding(RestEmbedder):
    provider_name = "mistral"
    default_model = "mistral-embed"
    default_batch_size = 64
    default_base_url = "https://api.mistral.ai/v1"
    known_dimensions = MISTRAL_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("Mistral", ("MISTRAL_API_KEY",))
