"""The provider table, the batching base class and the hash embedder (no model, no network)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import hash_embedder
from memsearch.embeddings import (
    DEFAULT_MODELS,
    PROVIDERS,
    EmbeddingProvider,
    ProviderSpec,
    get_provider,
    register_provider,
)
from memsearch.embeddings.base import (
    ApiErrors,
    BatchingEmbedder,
    InvalidBatchSizeError,
    batched,
    run_sync,
)
from memsearch.errors import (
    EmbeddingAPIError,
    EmbeddingError,
    MissingDependencyError,
    UnknownProviderError,
)

BUILT_IN = ["google", "jina", "local", "mistral", "ollama", "onnx", "openai", "use", "voyage"]


@pytest.fixture
def restore_registry() -> Iterator[None]:
    """Undo any register_provider() done by the test (the tables are restored in place)."""
    providers, defaults = dict(PROVIDERS), dict(DEFAULT_MODELS)
    yield
    PROVIDERS.clear()
    PROVIDERS.update(providers)
    DEFAULT_MODELS.clear()
    DEFAULT_MODELS.update(defaults)


class Recorder(BatchingEmbedder):
    """A provider that records each batch it is asked to embed; vectors are [len, index-in-batch]."""

    provider_name = "recorder"
    default_model = "recorder-model"
    default_batch_size = 4
    api_errors: ClassVar[ApiErrors] = ApiErrors("Recorder")

    def __init__(self, *, model: str | None = None, batch_size: int = 0, answer: Any = None) -> None:
        super().__init__(model=model, batch_size=batch_size)
        self.batches: list[list[str]] = []
        self.answer = answer

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        self.batches.append(list(texts))
        if self.answer is not None:
            return self.answer(texts)  # type: ignore[no-any-return]
        return [[float(len(text)), 1.0 if query else 0.0] for text in texts]


# --- the registry -------------------------------------------------------------------------------


def test_table_names_the_nine_built_in_providers() -> None:
    assert sorted(name for name in PROVIDERS if name in BUILT_IN) == BUILT_IN
    assert set(BUILT_IN) <= set(PROVIDERS)
    for name in BUILT_IN:
        assert DEFAULT_MODELS[name] == PROVIDERS[name].default_model
    assert DEFAULT_MODELS["onnx"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert DEFAULT_MODELS["openai"] == "text-embedding-3-small"
    assert PROVIDERS["local"].extra == "local"
    assert PROVIDERS["use"].extra == "multilingual"
    # Only sentence-transformers and the multilingual model need an extra; the REST providers use
    # the standard library.
    assert [name for name in BUILT_IN if PROVIDERS[name].extra] == ["local", "use"]


def test_each_key_variable_in_the_table_is_the_one_its_provider_reads() -> None:
    """The hooks name a missing key from the table (no provider import); it must be the variable
    the provider itself reads first, for every provider that needs a key."""
    from memsearch.embeddings import PROVIDERS, _load_target

    for spec in (PROVIDERS[name] for name in BUILT_IN):
        if spec.name in ("onnx", "local", "use", "ollama"):  # local models; ollama's key is optional
            assert spec.key_env is None, spec.name
            continue
        provider_class = _load_target(spec)
        assert spec.key_env == provider_class.api_errors.key_envs[0], spec.name  # type: ignore[attr-defined]


def test_unknown_provider_lists_the_valid_names_sorted() -> None:
    with pytest.raises(UnknownProviderError) as info:
        get_provider("nope")
    message = str(info.value)
    assert message == f"Unknown embedding provider 'nope'. Available: {', '.join(sorted(PROVIDERS))}"
    assert ", ".join(BUILT_IN) in message or all(name in message for name in BUILT_IN)
    assert "embedding.provider" in info.value.hint
    assert isinstance(info.value, ValueError)


def test_missing_extra_gives_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, restore_registry: None, tmp_path: Path
) -> None:
    module = tmp_path / "needs_sdk_provider.py"
    module.write_text("import memsearch_test_sdk_that_is_not_installed\n\nclass P:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_provider(ProviderSpec("needs-sdk", "needs_sdk_provider:P", "m", "demo"))
    with pytest.raises(MissingDependencyError) as info:
        get_provider("needs-sdk")
    assert info.value.hint == 'pip install "memsearch[demo]"'
    assert "needs-sdk" in str(info.value)
    assert "memsearch_test_sdk_that_is_not_installed" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_local_provider_without_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail exactly as if the package were not installed.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.delitem(sys.modules, "memsearch.embeddings.local", raising=False)
    with pytest.raises(MissingDependencyError) as info:
        get_provider("local")
    assert info.value.hint == 'pip install "memsearch[local]"'
    assert "Hint: pip install" in info.value.one_line()


def test_a_broken_module_of_ours_is_not_reported_as_a_missing_extra(restore_registry: None) -> None:
    register_provider(ProviderSpec("broken", "memsearch.embeddings.no_such_module:X", "m", "demo"))
    with pytest.raises(ModuleNotFoundError) as info:
        get_provider("broken")
    assert not isinstance(info.value, MissingDependencyError)


def test_get_provider_passes_only_accepted_and_given_options(restore_registry: None) -> None:
    calls: list[dict[str, Any]] = []

    def factory(**kwargs: Any) -> Recorder:
        calls.append(kwargs)
        return Recorder(model=kwargs.get("model"), batch_size=kwargs.get("batch_size", 0))

    register_provider(ProviderSpec("narrow", factory, "m", None, frozenset({"model"})))
    register_provider(
        ProviderSpec("wide", factory, "m", None, frozenset({"model", "batch_size", "base_url", "api_key"}))
    )
    get_provider("narrow", model="x", batch_size=5, base_url="http://h", api_key="k")
    get_provider("wide", model="x", batch_size=5, base_url="http://h", api_key="k")
    get_provider("wide")
    get_provider("wide", batch_size=0, base_url="", api_key=None)
    assert calls == [
        {"model": "x"},
        {"model": "x", "batch_size": 5, "base_url": "http://h", "api_key": "k"},
        {},
        {},
    ]
    assert DEFAULT_MODELS["wide"] == "m"


def test_provider_spec_rejects_unknown_options() -> None:
    with pytest.raises(ValueError, match="unknown options"):
        ProviderSpec("x", "a:B", "m", None, frozenset({"model", "temperature"}))


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        import memsearch.embeddings
        heavy = ["numpy", "onnxruntime", "openai", "httpx", "httpx2", "tokenizers", "urllib.request"]
        print(json.dumps([name for name in heavy if name in sys.modules]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_shared_base_and_http_helper_load_no_transport() -> None:
    """The local providers import ``embeddings.base`` (and so ``memsearch.http``): the HTTP
    transport (``http.client`` brings ``email``) loads only when a request is made."""
    code = textwrap.dedent(
        """
        import json, sys
        import memsearch.embeddings.base, memsearch.http
        heavy = ["openai", "httpx", "http.client", "urllib.request", "email.parser"]
        print(json.dumps([name for name in heavy if name in sys.modules]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_isinstance_does_not_compute_the_dimension() -> None:
    class Exploding(Recorder):
        def _discover_dimension(self) -> int:
            raise AssertionError("isinstance() must not run a trial embed")

    provider = Exploding()
    assert isinstance(provider, EmbeddingProvider)
    assert not isinstance(object(), EmbeddingProvider)


class Duck:
    """The original protocol's five members, no base class; reading ``dimension`` fails."""

    model_name = "duck-1"
    batch_size = 4

    @property
    def dimension(self) -> int:
        raise AssertionError("isinstance() must not read dimension")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        return [[0.0, 1.0] for _ in texts]


async def test_a_protocol_class_without_the_base_gets_the_defaults(restore_registry: None) -> None:
    assert isinstance(Duck(), EmbeddingProvider)  # checked on the class: dimension is not read
    register_provider(ProviderSpec("duck", Duck, "duck-1"))
    provider = get_provider("duck")
    assert EmbeddingProvider in type(provider).__mro__
    provider.warm()  # the interface's default
    assert provider.cache_namespace == "duck-1"
    assert provider.document_text("x") == "x"
    assert await provider.embed_query(["q"]) == [[0.0, 1.0]]
    assert await provider.embed(["d"]) == [[1.0, 0.0]]


# --- batching, validation, lazy dimension --------------------------------------------------------


async def test_batches_of_batch_size_in_input_order() -> None:
    provider = Recorder(batch_size=4)
    texts = [f"t{i}" + "x" * i for i in range(10)]
    vectors = await provider.embed(texts)
    assert [len(b) for b in provider.batches] == [4, 4, 2]
    assert [v[0] for v in vectors] == [float(len(t)) for t in texts]
    assert await provider.embed([]) == []
    assert len(provider.batches) == 3  # no call for empty input


async def test_sorting_by_length_restores_the_input_order() -> None:
    class Sorted(Recorder):
        sort_by_length = True

    provider = Sorted(batch_size=2)
    texts = ["ccc", "a", "bbbbb", "dd"]
    vectors = await provider.embed(texts)
    assert provider.batches == [["a", "dd"], ["ccc", "bbbbb"]]
    assert [v[0] for v in vectors] == [3.0, 1.0, 5.0, 2.0]


async def test_queries_and_documents_get_their_prefixes() -> None:
    provider = Recorder()
    provider.query_prefix, provider.document_prefix = "query: ", "passage: "
    await provider.embed(["x"])
    await provider.embed_query(["x"])
    assert provider.batches == [["passage: x"], ["query: x"]]
    assert provider.document_text("x") == "passage: x"
    assert provider.query_text("x") == "query: x"


def test_batch_size_below_one_is_an_error() -> None:
    assert Recorder(batch_size=0).batch_size == 4  # 0 means the provider's default
    with pytest.raises(InvalidBatchSizeError, match="batch_size must be >= 1, got -1") as info:
        Recorder(batch_size=-1)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, EmbeddingError)
    with pytest.raises(ValueError):
        list(batched([1, 2], 0))
    assert [list(b) for b in batched(list(range(10)), 4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


async def test_wrong_vector_count_is_an_api_error() -> None:
    provider = Recorder(answer=lambda texts: [[1.0, 2.0]] * (len(texts) - 1))
    with pytest.raises(EmbeddingAPIError, match="returned 1 vectors for 2 texts"):
        await provider.embed(["a", "b"])


async def test_mixed_dimensions_are_an_error() -> None:
    provider = Recorder(answer=lambda texts: [[1.0] * (2 + i) for i in range(len(texts))])
    with pytest.raises(EmbeddingError, match="dimension 3") as info:
        await provider.embed(["a", "b"])
    assert info.value.hint


async def test_a_vector_disagreeing_with_the_known_dimension_is_an_error() -> None:
    class Known(Recorder):
        known_dimensions: ClassVar[dict[str, int]] = {"recorder-model": 3}

    with pytest.raises(EmbeddingError, match="is known to have dimension 3"):
        await Known().embed(["a"])


def test_dimension_is_found_lazily_by_one_trial_embed() -> None:
    provider = Recorder()
    assert provider.batches == []  # nothing at construction
    assert provider.dimension == 2
    assert provider.dimension == 2
    assert len(provider.batches) == 1


async def test_dimension_trial_works_inside_a_running_event_loop() -> None:
    provider = Recorder()
    assert provider.dimension == 2
    assert len(provider.batches) == 1


async def test_an_embed_before_dimension_makes_the_trial_unnecessary() -> None:
    provider = Recorder()
    await provider.embed(["abc"])
    assert provider.dimension == 2
    assert len(provider.batches) == 1


def test_known_dimension_needs_no_call() -> None:
    class Known(Recorder):
        known_dimensions: ClassVar[dict[str, int]] = {"recorder-model": 7}

    provider = Known()
    assert provider.dimension == 7
    assert provider.batches == []


async def test_run_sync_reraises_errors_from_the_helper_thread() -> None:
    async def fail() -> None:
        raise EmbeddingAPIError("boom")

    with pytest.raises(EmbeddingAPIError, match="boom"):
        run_sync(fail())


def test_run_sync_without_a_loop() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 5

    assert run_sync(value()) == 5


def test_api_errors_wording() -> None:
    errors = ApiErrors("Acme", ("ACME_API_KEY",), ((404, "pull it"),))
    rejected = errors.http_status("http://x/e", 401, "bad key")
    assert "rejected the API key (HTTP 401)" in str(rejected)
    assert "ACME_API_KEY" in rejected.hint and "embedding.api_key" in rejected.hint
    assert errors.http_status("http://x/e", 404, "").hint == "pull it"
    other = errors.http_status("http://x/e", 400, "  model   does not\nexist " + "y" * 1000)
    assert "HTTP 400: model does not exist" in str(other)
    assert len(str(other)) < 400
    missing = errors.missing_key()
    assert "ACME_API_KEY" in missing.hint and "embedding.api_key" in missing.hint


# --- the hash embedder (used by other modules' tests) ----------------------------------------------


def test_hash_embedder_registers_and_meets_the_protocol(restore_registry: None) -> None:
    hash_embedder.register()
    provider = get_provider("hash")
    assert isinstance(provider, EmbeddingProvider)
    assert provider.dimension == 64
    assert provider.model_name == "hash-64"


async def test_hash_embedder_is_deterministic_normalised_and_lexical() -> None:
    provider = hash_embedder.HashEmbedder()
    a, b, c, empty = await provider.embed(
        ["Database connection timeout", "the database connection timed out", "chocolate cake", ""]
    )
    again = await hash_embedder.HashEmbedder().embed(["Database connection timeout"])
    assert again[0] == a
    for vector in (a, b, c, empty):
        assert len(vector) == 64
        assert sum(x * x for x in vector) == pytest.approx(1.0)

    def dot(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert dot(a, b) > dot(a, c)
    assert hash_embedder.tokens("Hello 世界, foo_bar X1") == ["hello", "世", "界", "foo_bar", "x1"]
    assert provider.calls == 1 and len(provider.embedded) == 4
