"""The shared machinery of every built-in provider: batching, validation, lazy dimension, errors.

This module owns :class:`BatchingEmbedder` (subclasses implement one method, ``_embed_batch``),
:class:`ApiErrors` (the wording of every network failure, so all providers fail alike), API-key
lookup, and :func:`run_sync` (how a sync property may run one async trial embed).

Why a base class rather than a helper function: the guarantees the indexer relies on (as many
vectors as texts, one dimension throughout, batches never larger than ``batch_size``, query vs
document prefixes applied the same way the cache hashes them) are easy to get subtly wrong in eight
places and cheap to get right in one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from memsearch.errors import (
    EmbeddingAPIError,
    EmbeddingError,
    InvalidBatchSizeError,
    MemSearchError,
    MissingAPIKeyError,
)

T = TypeVar("T")

#: How long to wait for a TCP (and TLS) connection: an endpoint that is not there fails fast.
CONNECT_TIMEOUT = 5.0
#: Pause before the single retry of a transient failure (HTTP 429/5xx, reset connection).
RETRY_DELAY = 0.3


def check_batch_size(size: int) -> int:
    """``size`` if it is at least 1, else :class:`InvalidBatchSizeError`."""
    if size < 1:
        raise InvalidBatchSizeError(
            f"batch_size must be >= 1, got {size}",
            hint="Set embedding.batch_size to a positive number, or 0 for the provider's default.",
        )
    return size


def batched(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` items (10 items, size 4 → 4, 4, 2)."""
    check_batch_size(size)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, even when called inside a running event loop.

    A sync property (``dimension``) may need one async trial embed. Inside a running loop we cannot
    nest ``asyncio.run``, so the coroutine runs on a fresh loop in a helper thread; the caller's loop
    is blocked for that one request, which is the price of a sync ``dimension``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name="memsearch-trial-embed", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


@dataclass(frozen=True)
class ServiceWording:
    """What kind of service failed, and which settings the hints point at.

    One :class:`ApiErrors` class words every remote service (embeddings, the remote reranker, LLM
    endpoints); what differs between them is collected here: the noun in the messages (``kind``),
    the exception classes raised, and the hints. Templates may use ``{label}`` and ``{key_env}``.
    """

    #: "embedding", "reranking", "LLM": as in "the OpenAI embedding endpoint".
    kind: str
    error: type[MemSearchError]
    missing_key_error: type[MemSearchError]
    key_hint: str
    unreachable_hint: str
    timeout_hint: str
    bad_response_hint: str
    #: HTTP status -> hint, after the service's own ``status_hints``.
    status_hints: Mapping[int, str]


#: HTTP 5xx, after the one retry ``post_json`` (and the openai SDK) makes.
SERVER_FAILED_HINT = "The server failed (also on one retry); try again later or check its logs."

EMBEDDING = ServiceWording(
    kind="embedding",
    error=EmbeddingAPIError,
    missing_key_error=MissingAPIKeyError,
    key_hint="Set {key_env} or the config key embedding.api_key "
    "(e.g. memsearch config set embedding.api_key env:{key_env}).",
    unreachable_hint="Check that the server is running and reachable, and that embedding.base_url is right.",
    timeout_hint="Check that the server is healthy, or lower embedding.batch_size.",
    bad_response_hint="Check that embedding.base_url points at the embeddings API of that service.",
    status_hints={
        400: "Check the model name and the input; the API refused the request.",
        404: "Check embedding.model and embedding.base_url: the endpoint or model was not found.",
        413: "Lower embedding.batch_size: the request was too large.",
        429: "The API is rate-limiting or out of quota; wait, or lower embedding.batch_size.",
        **dict.fromkeys((500, 502, 503, 504), SERVER_FAILED_HINT),
    },
)


@dataclass(frozen=True)
class ApiErrors:
    """How one service's failures are worded: who failed, and which env var holds its key.

    ``wording`` says what kind of service it is (:data:`EMBEDDING` unless given), so the same
    methods word a reranker or an LLM endpoint without a copy of this class.
    """

    label: str
    key_envs: tuple[str, ...] = ()
    #: HTTP status -> hint, consulted before the generic hints.
    status_hints: tuple[tuple[int, str], ...] = ()
    wording: ServiceWording = EMBEDDING

    @property
    def kind(self) -> str:
        return self.wording.kind

    @property
    def key_env(self) -> str:
        return self.key_envs[0] if self.key_envs else "the provider's API key variable"

    def _fill(self, template: str) -> str:
        return template.format(label=self.label, key_env=self.key_env)

    def key_hint(self) -> str:
        return self._fill(self.wording.key_hint)

    def missing_key(self) -> MemSearchError:
        return self.wording.missing_key_error(
            f"No API key for the {self.label} {self.kind} provider.", self.key_hint()
        )

    def unreachable(self, url: str, reason: object) -> MemSearchError:
        return self.wording.error(
            f"Could not connect to the {self.label} {self.kind} endpoint at {url}: {reason}",
            hint=self._fill(self.wording.unreachable_hint),
        )

    def timed_out(self, url: str, seconds: float) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} did not answer within {seconds:g} s.",
            hint=self._fill(self.wording.timeout_hint),
        )

    def http_status(self, url: str, status: int, body: str) -> MemSearchError:
        if status in (401, 403):
            return self.wording.error(
                f"The {self.label} API rejected the API key (HTTP {status}).", self.key_hint()
            )
        detail = " ".join(body.split())[:300]
        return self.wording.error(
            f"The {self.label} {self.kind} API at {url} returned HTTP {status}"
            + (f": {detail}" if detail else "."),
            hint=dict(self.status_hints).get(status)
            or self._fill(self.wording.status_hints.get(status, "See the message for the server's reason.")),
        )

    def bad_response(self, url: str, detail: str) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} sent an unexpected response: {detail}",
            hint=self._fill(self.wording.bad_response_hint),
        )


def resolve_api_key(explicit: str | None, errors: ApiErrors, *, required: bool = True) -> str | None:
    """The explicit key, else the first set env var of ``errors.key_envs``; raise if required."""
    if explicit:
        return explicit
    for name in errors.key_envs:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if required:
        raise errors.missing_key()
    return None


class BatchingEmbedder:
    """Base class of the built-in providers.

    Subclasses set the class attributes and implement :meth:`_embed_batch`; they may override
    :meth:`_connection` to hold a client open for the batches of one call. Prefixes
    (``query_prefix``/``document_prefix``) are applied here, so the text a model receives is exactly
    :meth:`document_text` and the embedding cache can hash it.
    """

    provider_name: ClassVar[str] = ""
    default_model: ClassVar[str] = ""
    default_batch_size: ClassVar[int] = 32
    #: model -> vector dimension, for models whose dimension is known without asking.
    known_dimensions: ClassVar[Mapping[str, int]] = {}
    #: Sort texts by length before batching (less padding for local models); order is restored.
    sort_by_length: ClassVar[bool] = False
    #: How this provider's failures are worded (an instance may refine it, e.g. with its URL).
    api_errors: ClassVar[ApiErrors] = ApiErrors("embedding")

    def __init__(self, *, model: str | None = None, batch_size: int = 0) -> None:
        self._model = model or self.default_model
        self._batch_size = check_batch_size(batch_size or self.default_batch_size)
        self._dimension: int | None = self._known_dimension()
        self._dimension_from_table = self._dimension is not None
        self.errors = self.api_errors
        self.query_prefix = ""
        self.document_prefix = ""

    # --- the protocol ----------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def dimension(self) -> int:
        """The vector dimension: from the known-model table, else one trial embed (first access)."""
        if self._dimension is None:
            self._dimension = self._discover_dimension()
        return self._dimension

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (chunks), in ``batch_size`` slices, in input order."""
        return await self._embed_all(list(texts), query=False)

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        """Embed search queries (the model's query prefix or task type, where it has one)."""
        return await self._embed_all(list(texts), query=True)

    def warm(self) -> None:
        """Load local model files now (blocking; meant for a worker thread), so that loading
        overlaps other start-up work such as opening the store. API providers have nothing to load."""

    # --- extension points ------------------------------------------------------------------

    def _known_dimension(self) -> int | None:
        """The model's dimension if the provider knows it without asking (``None`` otherwise)."""
        return self.known_dimensions.get(self._model)

    def document_text(self, text: str) -> str:
        """The exact text the model receives for a document (the embedding cache hashes this)."""
        return self.document_prefix + text

    def query_text(self, text: str) -> str:
        return self.query_prefix + text

    @property
    def cache_namespace(self) -> str:
        """What identifies this provider's vectors in the embedding cache (provider and model)."""
        return f"{self.provider_name}:{self._model}"

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A client shared by the batches of one call (``None`` when a provider needs none)."""
        yield None

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        """Embed one batch of already-prefixed texts; return one vector per text."""
        raise NotImplementedError

    def _discover_dimension(self) -> int:
        vectors = run_sync(self._embed_all(["dimension probe"], query=False))
        return len(vectors[0])

    # --- the work --------------------------------------------------------------------------

    async def _embed_all(self, texts: list[str], *, query: bool) -> list[list[float]]:
        if not texts:
            return []
        order = list(range(len(texts)))
        if self.sort_by_length:
            order.sort(key=lambda i: len(texts[i]))
        prepare = self.query_text if query else self.document_text
        out: list[list[float]] = [[] for _ in texts]
        async with self._connection() as conn:
            for indices in batched(order, self._batch_size):
                batch = [prepare(texts[i]) for i in indices]
                vectors = await self._embed_batch(conn, batch, query=query)
                self._check(vectors, len(batch))
                for i, vector in zip(indices, vectors, strict=True):
                    out[i] = vector
        return out

    def _check(self, vectors: list[list[float]], expected: int) -> None:
        """One vector per input, all of the model's dimension; learn the dimension if unknown."""
        if len(vectors) != expected:
            raise EmbeddingAPIError(
                f"The {self.errors.label} embedding provider returned {len(vectors)} vectors "
                f"for {expected} texts.",
                hint="The endpoint is not behaving like an embeddings API; check embedding.base_url.",
            )
        if not vectors:
            return
        if self._dimension is None:
            self._dimension = len(vectors[0])
        for vector in vectors:
            if len(vector) != self._dimension:
                source = "is known to have" if self._dimension_from_table else "first returned"
                raise EmbeddingError(
                    f"The {self.errors.label} model '{self._model}' returned a vector of dimension "
                    f"{len(vector)}, but it {source} dimension {self._dimension}.",
                    hint="Check embedding.model; if the server changes the model's dimension, "
                    "re-create the index with memsearch reset.",
                )
