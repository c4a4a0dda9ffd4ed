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

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from memsearch import heap, private
from memsearch.errors import EmbeddingError, PrivatePathError
from memsearch.models import onnx_build, onnx_cache

logger = logging.getLogger("memsearch.onnx")
T = TypeVar("T")
R = TypeVar("R")
_LOCK = threading.Lock()
_SESSIONS: dict[tuple[str, int], ort.InferenceSession] = {}  # (graph file, threads per run)
_TOKENIZERS: dict[tuple[str, int, str | None], TokenizerInfo] = {}


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: Where optimised graphs are kept, under ``~/.memsearch`` (one folder per source file and
#: onnxruntime version; delete it freely, it is rebuilt on the next use).
OPTIMIZED_DIR = "onnx-optimized"
#: Set to ``0`` to optimise the graph in every process instead of keeping the optimised copy.
OPTIMIZED_CACHE_ENV = "MEMSEARCH_ONNX_CACHE"


def _options(level: ort.GraphOptimizationLevel, threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = level
    # Memory patterns are planned and kept per input shape, and every batch of texts has its own
    # shape (padded to its longest text): while indexing, the arena grew more with them, for no
    # measured gain (docs/scaling.md has the figures).
    options.enable_mem_pattern = False
    options.log_severity_level = 3  # warnings about unused initialisers are noise to users
    return options


def optimized_copy(path: Path) -> Path | None:
    """``path``'s graph as onnxruntime optimises it, saved once under ``~/.memsearch``; None if unavailable.

    Why: the packaged model stores its weights as int8 and widens them with Cast and Mul nodes;
    graph optimisation folds those into float32 weights in every process that loads it. That
    costs time in every process and more peak memory than loading the folded graph (docs/scaling.md), because
    while it folds it holds the int8 weights, the parsed model and the new float32 weights at
    once. Saved with its weights in a separate file, the folded graph is memory-mapped by the
    next process and needs no optimisation at all; the vectors are the same (the test compares
    them). The copy is keyed by the source file (path, size, mtime) and the onnxruntime version,
    written to a temporary folder and renamed into place, so a crash or a concurrent builder
    never leaves a half-written graph to load. It is built in a child process
    (``memsearch.models.onnx_build``): folding is the model's largest memory peak (docs/scaling.md), and
    a process rarely returns that memory to the system afterwards; only if the child cannot run
    is it built here.
    """
    from memsearch.config.envvars import env_flag

    if not env_flag(OPTIMIZED_CACHE_ENV, default=True):
        return None
    try:
        source = path.resolve()
        stat = source.stat()
        key = f"onnxruntime {ort.__version__} | {source} | {stat.st_size} bytes | mtime_ns {stat.st_mtime_ns}"
        root = private.home_dir(OPTIMIZED_DIR)
        folder = root / hashlib.sha256(key.encode()).hexdigest()[:20]
        found = onnx_cache.verified(folder, key)
        if found is not None:
            return found
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    except (OSError, PrivatePathError):
        logger.debug("no optimised copy of %s", path, exc_info=True)
        return None
    try:
        if not onnx_build.build_in_child(source, building / "model.onnx"):
            onnx_build.build_optimized(source, building / "model.onnx")
        onnx_cache.seal(building, key)
        with contextlib.suppress(OSError):  # another process finished first: use its copy
            building.rename(folder)
        return onnx_cache.verified(folder, key)
    except Exception:  # an unreadable model or a full disk: the caller loads the source as before
        logger.debug("could not save an optimised copy of %s", path, exc_info=True)
        return None
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _load(path: Path, threads: int) -> ort.InferenceSession:
    optimized = optimized_copy(path)
    if optimized is not None:
        try:  # already optimised: loading it maps the weights and folds nothing
            options = _options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, threads)
            return ort.InferenceSession(str(optimized), options, providers=["CPUExecutionProvider"])
        except Exception:  # a damaged copy: drop it, it is rebuilt next time
            logger.debug("discarding the optimised copy %s", optimized, exc_info=True)
            onnx_cache.discard(optimized.parent)
    options = _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL, threads)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def get_session(path: Path, *, single_threaded: bool = False) -> ort.InferenceSession:
    """The process-wide InferenceSession for the graph at ``path`` (created on first request).

    By default one run uses every core: the fastest single run (a query). ``single_threaded``
    gives the graph's other session, whose runs use one thread each, for :class:`ParallelRuns`:
    several inputs at once, one per core, which on 2 cores embeds a bulk of texts ~15 % faster
    than one run at a time on both (onnxruntime's threads wait on each other less; the vectors
    are the same, bit for bit). A lone query runs slower that way, so only a bulk step uses it.
    """
    threads = 1 if single_threaded else _cpu_count()
    key = (str(path.resolve()), threads)
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            try:
                session = _load(path, threads)
            except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
                raise EmbeddingError(
                    f"onnxruntime could not load the model {path}: {exc}",
                    hint="The file may be truncated or not an ONNX model; reinstall or re-download it.",
                ) from exc
            _SESSIONS[key] = session
        return session


def release(*paths: Path) -> None:
    """Forget the sessions and tokenizers loaded from ``paths``: their memory goes back to the
    system once no caller holds them, and the next request loads them again. For a process that
    is done with a model while it still has other work (``ModelLifecycle.ONE_SHOT``)."""
    keys = {str(path.resolve()) for path in paths}
    with _LOCK:
        dropped = [_SESSIONS.pop(key) for key in [k for k in _SESSIONS if k[0] in keys]]
        for tokenizer_key in [k for k in _TOKENIZERS if k[0] in keys]:
            del _TOKENIZERS[tokenizer_key]
    if dropped:
        del dropped  # the last reference: onnxruntime frees the session's buffers here
        heap.trim()  # and glibc hands them back instead of keeping them for later (ONE_SHOT's point)


class ParallelRuns:
    """While open, runs of one model go one per core at once (each on one thread of its own), for
    a process about to embed many texts and then let the model go; closed, it does nothing.

    A context manager that owns the worker threads (re-entrant: they go when the outermost use
    ends); :meth:`map` runs ``fn`` over ``items`` on them in input order, or in the caller's
    thread when closed, on one core or with one item.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._depth = 0
        self._lock = threading.Lock()

    def __enter__(self) -> ParallelRuns:
        with self._lock:
            self._depth += 1
            if _cpu_count() > 1 and self._pool is None:
                self._pool = ThreadPoolExecutor(_cpu_count(), thread_name_prefix="memsearch-onnx-run")
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            pool = self._pool if self._depth == 0 else None
            if pool is not None:
                self._pool = None
        if pool is not None:
            pool.shutdown(wait=True)

    @property
    def active(self) -> bool:
        return self._pool is not None

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if self._pool is None or len(items) < 2:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))


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
