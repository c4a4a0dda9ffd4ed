"""The ``local`` provider: any sentence-transformers model, run by PyTorch on this machine.

This module owns the sentence-transformers call. It needs the ``local`` extra
(``pip install "memsearch[local]"``); importing this module without it raises ImportError, which
:func:`memsearch.embeddings.get_provider` turns into that install hint. The model loads on first
use, on CUDA or Apple's MPS when available. Models that define ``query``/``document`` (or
``passage``) prompts get them for queries and chunks respectively.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import threading
from typing import Any, ClassVar

from sentence_transformers import SentenceTransformer

from memsearch.embeddings.base import BatchingEmbedder, EmbeddingErrors
from memsearch.http import ApiErrors


def _device() -> str:
    try:
        import torch
    except ImportError:  # sentence-transformers without torch cannot run anyway
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


class LocalEmbedding(BatchingEmbedder):
    provider_name = "local"
    default_model = "all-MiniLM-L6-v2"
    default_batch_size = 64
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("sentence-transformers")

    def __init__(self, *, model: str | None = None, batch_size: int = 0) -> None:
        super().__init__(model=model, batch_size=batch_size)
        self._st: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._st is None:
                previous = os.environ.get("TQDM_DISABLE")
                os.environ["TQDM_DISABLE"] = "1"  # no progress bars in hook output
                stderr = io.StringIO()
                try:
                    with contextlib.redirect_stderr(stderr):
                        self._st = SentenceTransformer(self._model, device=_device(), trust_remote_code=True)
                finally:
                    if previous is None:
                        os.environ.pop("TQDM_DISABLE", None)
                    else:
                        os.environ["TQDM_DISABLE"] = previous
            return self._st

    def warm(self) -> None:
        self._load()

    def _discover_dimension(self) -> int:
        dimension = self._load().get_sentence_embedding_dimension()
        return int(dimension) if dimension else super()._discover_dimension()

    def _prompt_name(self, query: bool) -> str | None:
        prompts = getattr(self._load(), "prompts", None) or {}
        names = ("query",) if query else ("document", "passage")
        return next((name for name in names if name in prompts), None)

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        model = await asyncio.to_thread(self._load)
        prompt_name = self._prompt_name(query)
        vectors = await asyncio.to_thread(
            model.encode, texts, normalize_embeddings=True, prompt_name=prompt_name, show_progress_bar=False
        )
        result: list[list[float]] = vectors.tolist()
        return result
