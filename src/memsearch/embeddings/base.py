"""The shared machinery of every built-in provider: batching, validation, lazy dimension, errors.

This module owns :class:`BatchingEmbedder` (subclasses implement one method, ``_embed_batch``),
:data:`EMBEDDING` (how an embedding API's failures are worded, so all providers fail alike; the
wording machinery itself is :mod:`memsearch.http`'s) and :func:`run_sync` (how a sync property may
run one async trial embed).

Why a base class rather than a helper function: the guarantees the indexer relies on (as many
vectors as texts, one dimension throughout, batches never larger than ``batch_size``, query vs
document prefixes applied the same way the cache hashes them) are easy to get subtly wrong in eight
places and cheap to get right in one.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, TypeVar

from memsearch.embeddings import EmbeddingProvider
from memsearch.errors import (
    EmbeddingAPIError,
    EmbeddingError,
    InvalidBatchSizeError,
    MissingAPIKeyError,
)
from memsearch.http import SERVER_FAILED_HINT, ServiceWording, resolve_api_key
from memsearch.http import ApiErrors as ServiceErrors

if TYPE_CHECKING:
    pass

T = TypeVar("T")


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


def is_finite(vector: Sequence[float]) -> bool:
    """Whether every value of ``vector`` is a finite number (no NaN, no infinity, no non-number).

    One C-level sum: NaN and infinities carry through it (inf - inf is NaN), so it costs a tenth of a
    Python loop over the values (docs/scaling.md)."""
    try:
        return math.isfinite(sum(vector))
    except (TypeError, OverflowError):
        return False


def check_finite(vectors: Sequence[Sequence[float]], *, provider: str, model: str) -> None:
    """Raise :class:`EmbeddingAPIError` naming ``provider`` when a vector has a NaN or infinite
    value: such a vector matches nothing (every similarity with it is NaN) and must never reach
    the embedding cache or the store, where it would outlive the fault that made it."""
    bad = [i for i, vector in enumerate(vectors) if not is_finite(vector)]
    if bad:
        raise EmbeddingAPIError(
            f"The {provider} embedding provider returned {len(bad)} of {len(vectors)} vectors with "
            f"NaN or infinite values (model '{model}'); nothing was stored.",
            hint="The model or its server is misbehaving: check embedding.model and the server "
            "(for onnx, delete ~/.memsearch/onnx-optimized), then run the command again.",
        )


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
class EmbeddingErrors(ServiceErrors):
    """:class:`~memsearch.http.ApiErrors` worded for an embedding API unless told otherwise, so a
    provider names only itself and its key variables: ``EmbeddingErrors("Ollama", ("OLLAMA_API_KEY",))``."""

    wording: ServiceWording = field(default=EMBEDDING, kw_only=True)


#: The name providers written before :mod:`memsearch.http` existed import (onnx, third-party ones).
ApiErrors = EmbeddingErrors


class BatchingEmbedder(EmbeddingProvider):
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
    api_errors: ClassVar[ServiceErrors] = EmbeddingErrors("embedding")

    def __init__(self, *, model: str | None = None, batch_size: int = 0) -> None:
        self._model = model or self.default_model
        self._batch_size = check_batch_size(batch_size or self.default_batch_size)
        self._dimension: int | None = self._known_dimension()
        self._dimension_from_table = self._dimension is not None
        self.errors: ServiceErrors = self.api_errors
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
        # A text given twice (two notes with the same paragraph) is embedded once.
        first = {text: i for i, text in reversed(list(enumerate(texts)))}
        order = sorted(first.values())
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
        if len(first) < len(texts):
            out = [out[i] if i == first[text] else list(out[first[text]]) for i, text in enumerate(texts)]
        return out

    def _check(self, vectors: list[list[float]], expected: int) -> None:
        """One vector per input, all of the model's dimension and finite; learn the dimension if
        unknown. The one check every built-in provider's vectors pass before anyone uses them."""
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
        check_finite(vectors, provider=self.errors.label, model=self._model)


class RemoteOptions(TypedDict, total=False):
    """The keyword options every remote provider takes (what :func:`~memsearch.embeddings.get_provider`
    passes on); a provider with options of its own accepts these as ``**options``."""

    model: str | None
    batch_size: int
    base_url: str | None
    api_key: str | None
    timeout: float


class RemoteEmbedder(BatchingEmbedder):
    """Base class of the providers that call an API: base URL, API key and request deadline.

    The constructor is the same for every vendor; what differs is said by class attributes and
    three hooks: :meth:`_resolve_base_url` (environment variables, shorthand), :meth:`_configure`
    (wording or prefixes that depend on the model or the endpoint, before the key is looked up)
    and :meth:`_requires_key`.
    """

    default_base_url: ClassVar[str] = ""
    #: Whether the API refuses requests without a key (checked at construction, not first use).
    key_required: ClassVar[bool] = True
    #: Total deadline per request, seconds (local servers may need long for a big batch); the
    #: ``timeout`` argument (``embedding.timeout``) overrides it for one instance.
    timeout: float = 60.0

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 0,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 0,
    ) -> None:
        super().__init__(model=model, batch_size=batch_size or self._default_batch_size(model))
        if timeout and timeout > 0:
            self.timeout = timeout
        self.base_url = self._resolve_base_url(base_url).rstrip("/")
        self.api_key: str | None = None
        self._configure(base_url=base_url, api_key=api_key)
        self.api_key = resolve_api_key(api_key, self.errors, required=self._requires_key())
        self._configured(base_url=base_url, api_key=api_key)

    def _default_batch_size(self, model: str | None) -> int:
        """The batch size when none is given (0: the class's ``default_batch_size``)."""
        return 0

    def _resolve_base_url(self, base_url: str | None) -> str:
        return base_url or self.default_base_url

    def _configure(self, *, base_url: str | None, api_key: str | None) -> None:
        """Adjust wording or prefixes before the key is looked up (the arguments as given)."""

    def _configured(self, *, base_url: str | None, api_key: str | None) -> None:
        """Last step of construction, with the key looked up (the arguments as given)."""

    def _requires_key(self) -> bool:
        return self.key_required
