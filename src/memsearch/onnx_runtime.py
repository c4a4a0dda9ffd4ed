"""Running ONNX models: one onnxruntime session and one tokenizer per model file per process.

This module owns :func:`get_session` (the session options are chosen here, once, for every model
we run), :func:`get_tokenizer` and the padding of token ids into the int64 arrays BERT-style
graphs take (:func:`pad_batch`, :func:`pad_encodings`). The embedding provider
(``memsearch.embeddings.onnx``) and the cross-encoder reranker (``memsearch.reranker``) both run
their models through it, so two users of one file share one session (loading is paid once).

Importing this module imports onnxruntime, numpy and tokenizers: import it only where a model is
about to run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from memsearch.errors import EmbeddingError

_LOCK = threading.Lock()
_SESSIONS: dict[str, ort.InferenceSession] = {}
_TOKENIZERS: dict[tuple[str, int, str | None], TokenizerInfo] = {}


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def get_session(path: Path) -> ort.InferenceSession:
    """The process-wide InferenceSession for the graph at ``path`` (created on first request)."""
    key = str(path.resolve())
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = _cpu_count()
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # warnings about unused initialisers are noise to users
            try:
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
                raise EmbeddingError(
                    f"onnxruntime could not load the model {path}: {exc}",
                    hint="The file may be truncated or not an ONNX model; reinstall or re-download it.",
                ) from exc
            _SESSIONS[key] = session
        return session


@dataclass(frozen=True)
class TokenizerInfo:
    """A tokenizer set to truncate at the model's limit, and the id it pads with."""

    tokenizer: Tokenizer
    pad_id: int


def get_tokenizer(path: Path, max_length: int, pad_token: str | None) -> TokenizerInfo:
    """The tokenizer at ``path``, truncating at ``max_length``; padding is done by :func:`pad_batch`.

    We pad ourselves instead of calling ``encode_batch``: that runs on the tokenizers library's
    thread pool, which prints a warning in any child process forked later (hooks and the CLI do
    fork), and for the small batches we run it buys nothing.
    """
    key = (str(path.resolve()), max_length, pad_token)
    with _LOCK:
        info = _TOKENIZERS.get(key)
        if info is None:
            tokenizer = Tokenizer.from_file(str(path))
            token = pad_token or (tokenizer.padding or {}).get("pad_token")
            pad_id = tokenizer.token_to_id(token) if token else None
            if pad_id is None:  # no usable padding token named: take the common ones, else 0
                pad_id = next(
                    (i for t in ("[PAD]", "<pad>") if (i := tokenizer.token_to_id(t)) is not None), 0
                )
            tokenizer.no_padding()  # a tokenizer.json may pad every text to a fixed length
            tokenizer.enable_truncation(max_length=max_length)
            info = TokenizerInfo(tokenizer, pad_id)
            _TOKENIZERS[key] = info
        return info


def pad_encodings(encodings: Sequence[Encoding], pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids, attention mask and token type ids of ``encodings``, padded to the longest (int64)."""
    longest = max((len(e.ids) for e in encodings), default=0)
    input_ids = np.full((len(encodings), longest), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(encodings), longest), dtype=np.int64)
    type_ids = np.zeros((len(encodings), longest), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        input_ids[row, : len(encoding.ids)] = encoding.ids
        attention_mask[row, : len(encoding.ids)] = 1
        type_ids[row, : len(encoding.type_ids)] = encoding.type_ids
    return input_ids, attention_mask, type_ids


def pad_batch(info: TokenizerInfo, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask for ``texts``, padded to the longest (int64, as BERT graphs take)."""
    input_ids, attention_mask, _ = pad_encodings([info.tokenizer.encode(text) for text in texts], info.pad_id)
    return input_ids, attention_mask
