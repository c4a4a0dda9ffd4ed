"""The Google provider: Gemini embeddings over the Generative Language REST API.

This module owns the ``batchEmbedContents`` request (task type ``RETRIEVAL_DOCUMENT`` for chunks,
``RETRIEVAL_QUERY`` for queries), the table of known models and the dimension we ask them for, and
the key lookup (``GOOGLE_API_KEY``, else ``GEMINI_API_KEY``, as Google's SDK does). The key travels
in the ``x-goog-api-key`` header, never in the URL, so it cannot leak into an error message.
Vertex AI endpoints (OAuth, not API keys) are not supported by this provider.
"""

from __future__ import annotations

from typing import Any, ClassVar

from memsearch.embeddings.base import ApiErrors
from memsearch.embeddings.rest import RestEmbedder

#: model -> the output dimensionality we request (768 keeps indexes made by the original memsearch
#: compatible; gemini-embedding-001 is natively 3072). Unknown models get their native dimension.
GOOGLE_DIMENSIONS: dict[str, int] = {
    "gemini-embedding-001": 768,
    "gemini-embedding-2-preview": 768,
    "text-embedding-005": 768,
    "text-embedding-004": 768,
}

TASK_TYPES = {False: "RETRIEVAL_DOCUMENT", True: "RETRIEVAL_QUERY"}


class GoogleEmbedding(RestEmbedder):
    """Embeddings from the Gemini API (``POST {base}/models/{model}:batchEmbedContents``)."""

    provider_name = "google"
    default_model = "gemini-embedding-001"
    default_batch_size = 100  # the API's limit of requests per batch call
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    known_dimensions = GOOGLE_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = ApiErrors("Gemini", ("GOOGLE_API_KEY", "GEMINI_API_KEY"))

    @property
    def _model_id(self) -> str:
        return self._model.removeprefix("models/")

    def _url(self) -> str:
        return f"{self.base_url}/models/{self._model_id}:batchEmbedContents"

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.api_key or ""}

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        extra: dict[str, Any] = {"taskType": TASK_TYPES[query]}
        if self._dimension_from_table and self._dimension is not None:
            extra["outputDimensionality"] = self._dimension
        return {
            "requests": [
                {"model": f"models/{self._model_id}", "content": {"parts": [{"text": text}]}, **extra}
                for text in texts
            ]
        }

    def _vectors(self, payload: Any) -> list[list[float]]:
        return [list(map(float, item["values"])) for item in payload["embeddings"]]
