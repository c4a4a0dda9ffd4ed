"""The Jina AI provider (``POST {base}/embeddings`` with a retrieval task).

This module owns the model table (dimension, and whether the model takes a ``task``: v3 and v4 do,
embedding queries as ``retrieval.query`` and chunks as ``retrieval.passage``; v2 models do not).
An unknown model gets one trial embed for its dimension rather than a guess. The key comes from
``api_key`` or ``JINA_API_KEY``. Python callers may also fix ``task`` or ``dimensions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from memsearch.embeddings.base import EmbeddingErrors, RemoteOptions
from memsearch.http import ApiErrors

if TYPE_CHECKING:
    from typing_extensions import Unpack
from memsearch.embeddings.rest import RestEmbedder


@dataclass(frozen=True)
class JinaModel:
    dimension: int
    takes_task: bool = True


JINA_MODELS: dict[str, JinaModel] = {
    "jina-embeddings-v4": JinaModel(2048),
    "jina-embeddings-v3": JinaModel(1024),
    "jina-embeddings-v2-base-en": JinaModel(768, takes_task=False),
    "jina-embeddings-v2-base-code": JinaModel(768, takes_task=False),
}

TASKS = {False: "retrieval.passage", True: "retrieval.query"}


class JinaEmbedding(RestEmbedder):
    provider_name = "jina"
    default_model = "jina-embeddings-v4"
    default_batch_size = 128
    default_base_url = "https://api.jina.ai/v1"
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("Jina AI", ("JINA_API_KEY",))

    def __init__(
        self, *, task: str | None = None, dimensions: int | None = None, **options: Unpack[RemoteOptions]
    ) -> None:
        self._fixed_task = task
        self._dimensions = dimensions
        super().__init__(**options)

    def _known_dimension(self) -> int | None:
        if self._dimensions:
            return self._dimensions
        spec = JINA_MODELS.get(self._model)
        return spec.dimension if spec else None

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "input": texts}
        spec = JINA_MODELS.get(self._model)
        task = self._fixed_task if self._fixed_task is not None else TASKS[query]
        if task and (spec is None or spec.takes_task):
            body["task"] = task
        if self._dimensions:
            body["dimensions"] = self._dimensions
        return body

    @property
    def cache_namespace(self) -> str:
        suffix = f"@{self._dimensions}" if self._dimensions else ""
        return f"{super().cache_namespace}{suffix}"
