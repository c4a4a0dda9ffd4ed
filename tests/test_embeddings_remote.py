"""Network providers against a real local HTTP server that speaks each vendor's embeddings API.

OpenAI goes through the real ``openai`` SDK; the others through our stdlib client. No API key or
internet is needed: the fake server (tests/fake_servers.py) listens on 127.0.0.1.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

import pytest

from fake_servers import FakeEmbeddingServer, fake_api, fake_vector
from memsearch.embeddings import get_provider
from memsearch.embeddings.ollama import host_from_env
from memsearch.errors import EmbeddingAPIError, MissingAPIKeyError

__all__ = ["fake_api"]  # the fixture, used by name


@dataclass(frozen=True)
class Case:
    """What one provider's requests look like on the wire."""

    name: str
    root: str  # appended to the server URL to make base_url
    path: str  # the request path for the default model
    auth_header: str
    auth_value: str  # with the key "k"
    key_env: str | None  # None: no key required
    dimension: int  # the default model's known dimension
    default_model: str


CASES = [
    Case("openai", "/v1", "/v1/embeddings", "authorization", "Bearer k", "OPENAI_API_KEY", 1536,
         "text-embedding-3-small"),
    Case("ollama", "", "/api/embed", "authorization", "Bearer k", None, 768, "nomic-embed-text"),
    Case("google", "/v1beta", "/v1beta/models/gemini-embedding-001:batchEmbedContents", "x-goog-api-key", "k",
         "GOOGLE_API_KEY", 768, "gemini-embedding-001"),
    Case("voyage", "/v1", "/v1/embeddings", "authorization", "Bearer k", "VOYAGE_API_KEY", 512,
         "voyage-3-lite"),
    Case("jina", "/v1", "/v1/embeddings", "authorization", "Bearer k", "JINA_API_KEY", 2048,
         "jina-embeddings-v4"),
    Case("mistral", "/v1", "/v1/embeddings", "authorization", "Bearer k", "MISTRAL_API_KEY", 1024,
         "mistral-embed"),
]  # fmt: skip
IDS = [case.name for case in CASES]
REST = [case for case in CASES if case.name != "openai"]


def texts_sent(case: Case, body: dict[str, Any]) -> list[str]:
    """The texts a request carried, whatever the vendor's shape."""
    if case.name == "google":
        return [r["content"]["parts"][0]["text"] for r in body["requests"]]
    return list(body["input"])


def provider(case: Case, server: FakeEmbeddingServer, **options: Any) -> Any:
    server.dimensions.setdefault(case.default_model, case.dimension)
    options.setdefault("api_key", "k")
    return get_provider(case.name, base_url=server.url + case.root, **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_request_shape_auth_and_base_url(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.dimensions[case.default_model] = case.dimension
    p = provider(case, fake_api)
    assert p.model_name == case.default_model
    vectors = await p.embed(["alpha", "beta"])
    (request,) = fake_api.requests
    assert request.path == case.path
    assert request.headers[case.auth_header] == case.auth_value
    sent = texts_sent(case, request.body)
    assert [s.endswith(t) for s, t in zip(sent, ["alpha", "beta"], strict=True)] == [True, True]
    # the server answers with data in reverse order: the client must sort by index
    assert vectors == [fake_vector(s, case.dimension) for s in sent]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_known_dimension_needs_no_request(case: Case, fake_api: FakeEmbeddingServer) -> None:
    p = provider(case, fake_api)
    assert p.dimension == case.dimension
    assert fake_api.requests == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_unknown_model_dimension_by_one_trial_embed_on_first_access(
    case: Case, fake_api: FakeEmbeddingServer
) -> None:
    fake_api.dimensions["custom-model"] = 12
    p = provider(case, fake_api, model="custom-model")
    assert fake_api.requests == []  # not at construction
    assert p.dimension == 12
    assert p.dimension == 12
    assert len(fake_api.requests) == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_trial_embed_from_inside_a_running_loop(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.dimensions["custom-model"] = 5
    p = provider(case, fake_api, model="custom-model")
    assert p.dimension == 5
    vectors = await p.embed(["x"])
    assert len(vectors[0]) == 5


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_batches_follow_batch_size(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.dimensions["m"] = 4
    p = provider(case, fake_api, model="m", batch_size=2)
    vectors = await p.embed([f"text {i}" for i in range(5)])
    assert len(vectors) == 5
    assert [len(texts_sent(case, r.body)) for r in fake_api.requests] == [2, 2, 1]


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_rejected_key(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.fail(401, '{"error": {"message": "Incorrect API key"}}')
    p = provider(case, fake_api)
    with pytest.raises(EmbeddingAPIError) as info:
        await p.embed(["x"])
    assert "rejected the API key (HTTP 401)" in str(info.value)
    assert "embedding.api_key" in info.value.hint
    if case.key_env:
        assert case.key_env in info.value.hint
    assert len(fake_api.requests) == 1  # a rejected key is not retried


@pytest.mark.parametrize("case", [c for c in CASES if c.key_env], ids=[c.name for c in CASES if c.key_env])
def test_missing_key_fails_at_construction_with_a_hint(case: Case) -> None:
    with pytest.raises(MissingAPIKeyError) as info:
        get_provider(case.name)  # the vendor's own endpoint, no key anywhere
    assert case.key_env is not None and case.key_env in info.value.hint
    assert "embedding.api_key" in info.value.hint


@pytest.mark.parametrize("case", [c for c in CASES if c.key_env], ids=[c.name for c in CASES if c.key_env])
async def test_key_from_the_environment(
    case: Case, fake_api: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert case.key_env is not None
    monkeypatch.setenv(case.key_env, "from-env")
    fake_api.dimensions[case.default_model] = case.dimension
    p = get_provider(case.name, base_url=fake_api.url + case.root)
    await p.embed(["x"])
    assert fake_api.requests[0].headers[case.auth_header] == case.auth_value.replace("k", "from-env")
    # an explicit key wins over the environment
    fake_api.requests.clear()
    await provider(case, fake_api, api_key="explicit").embed(["x"])
    assert fake_api.requests[0].headers[case.auth_header] == case.auth_value.replace("k", "explicit")


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_server_error_is_retried_once(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.fail(503, '{"error": "overloaded"}', times=1)
    vectors = await provider(case, fake_api, model="m").embed(["x"])
    assert len(vectors) == 1
    assert len(fake_api.requests) == 2


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_persistent_server_error_names_status_and_body(
    case: Case, fake_api: FakeEmbeddingServer
) -> None:
    fake_api.fail(500, '{"error": "model crashed"}')
    with pytest.raises(EmbeddingAPIError) as info:
        await provider(case, fake_api, model="m").embed(["x"])
    assert "HTTP 500" in str(info.value)
    assert "model crashed" in str(info.value)
    assert len(fake_api.requests) == 2  # one retry, no more


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_not_found_has_a_hint(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.fail(404, '{"error": "model not found"}')
    with pytest.raises(EmbeddingAPIError) as info:
        await provider(case, fake_api, model="nosuch").embed(["x"])
    assert "HTTP 404" in str(info.value)
    expected = "ollama pull nosuch" if case.name == "ollama" else "embedding.model"
    assert expected in info.value.hint


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_garbage_answer(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.garbage()
    with pytest.raises(EmbeddingAPIError, match="unexpected response") as info:
        await provider(case, fake_api, model="m").embed(["x"])
    assert "not JSON" in str(info.value)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_answer_with_too_few_vectors(case: Case, fake_api: FakeEmbeddingServer) -> None:
    fake_api.short()
    with pytest.raises(EmbeddingAPIError, match="returned 1 vectors for 2 texts"):
        await provider(case, fake_api, model="m").embed(["x", "y"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_unreachable_endpoint_fails_fast(case: Case) -> None:
    url = f"http://127.0.0.1:{free_port()}{case.root}"
    p = get_provider(case.name, base_url=url, api_key="k", model="m")
    started = time.monotonic()
    with pytest.raises(EmbeddingAPIError) as info:
        await p.embed(["x"])
    assert time.monotonic() - started < 3.0
    assert "Could not connect" in str(info.value)
    assert url in str(info.value)
    assert "base_url" in info.value.hint


@pytest.mark.parametrize("case", REST, ids=[c.name for c in REST])
async def test_slow_server_times_out(
    case: Case, fake_api: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = provider(case, fake_api, model="m")
    monkeypatch.setattr(type(p), "timeout", 0.3)
    fake_api.delay(1.0)
    started = time.monotonic()
    with pytest.raises(EmbeddingAPIError, match=r"did not answer within 0\.3 s"):
        await p.embed(["x"])
    assert time.monotonic() - started < 1.0
    assert len(fake_api.requests) == 1  # a timeout is not retried


# --- per-provider request details ---------------------------------------------------------------


async def test_openai_body_and_env_base_url(
    fake_api: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_api.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    fake_api.dimensions["text-embedding-3-small"] = 1536
    p = get_provider("openai")
    await p.embed_query(["q"])
    (request,) = fake_api.requests
    assert request.body == {"model": "text-embedding-3-small", "input": ["q"], "encoding_format": "float"}
    assert request.headers["authorization"] == "Bearer sk-env"


async def test_openai_compatible_server_needs_no_key(fake_api: FakeEmbeddingServer) -> None:
    p = get_provider("openai", base_url=fake_api.url + "/v1", model="nomic-embed-text")
    assert len((await p.embed(["x"]))[0]) == 8
    assert "OpenAI-compatible" in p.errors.label


async def test_google_task_types_and_output_dimensionality(fake_api: FakeEmbeddingServer) -> None:
    p = provider(CASES[2], fake_api)
    await p.embed(["doc"])
    await p.embed_query(["question"])
    doc, query = (r.body["requests"][0] for r in fake_api.requests)
    assert doc == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "doc"}]},
        "taskType": "RETRIEVAL_DOCUMENT",
        "outputDimensionality": 768,
    }
    assert query["taskType"] == "RETRIEVAL_QUERY"
    fake_api.requests.clear()
    fake_api.dimensions["new-model"] = 3072
    unknown = provider(CASES[2], fake_api, model="models/new-model")
    assert unknown.dimension == 3072
    (request,) = fake_api.requests
    assert request.path == "/v1beta/models/new-model:batchEmbedContents"
    assert "outputDimensionality" not in request.body["requests"][0]


async def test_google_key_from_gemini_env(
    fake_api: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gem")
    fake_api.dimensions["gemini-embedding-001"] = 768
    await get_provider("google", base_url=fake_api.url + "/v1beta").embed(["x"])
    assert fake_api.requests[0].headers["x-goog-api-key"] == "gem"
    assert "key=" not in fake_api.requests[0].path  # never in the URL


async def test_voyage_input_type(fake_api: FakeEmbeddingServer) -> None:
    p = provider(CASES[3], fake_api)
    await p.embed(["d"])
    await p.embed_query(["q"])
    assert [r.body["input_type"] for r in fake_api.requests] == ["document", "query"]


async def test_jina_tasks_per_model_and_dimensions(fake_api: FakeEmbeddingServer) -> None:
    p = provider(CASES[4], fake_api)
    await p.embed(["d"])
    await p.embed_query(["q"])
    assert [r.body["task"] for r in fake_api.requests] == ["retrieval.passage", "retrieval.query"]
    fake_api.requests.clear()
    fake_api.dimensions["jina-embeddings-v2-base-en"] = 768
    await provider(CASES[4], fake_api, model="jina-embeddings-v2-base-en").embed_query(["q"])
    assert "task" not in fake_api.requests[0].body  # v2 models take no task

    from memsearch.embeddings.jina import JinaEmbedding

    fake_api.requests.clear()
    sized = JinaEmbedding(base_url=fake_api.url + "/v1", api_key="k", dimensions=256)
    assert sized.dimension == 256
    assert len((await sized.embed(["d"]))[0]) == 256
    assert fake_api.requests[0].body["dimensions"] == 256


async def test_jina_unknown_model_is_probed_not_guessed(fake_api: FakeEmbeddingServer) -> None:
    fake_api.dimensions["jina-embeddings-v9"] = 640
    assert provider(CASES[4], fake_api, model="jina-embeddings-v9").dimension == 640


async def test_ollama_prefixes_and_body(fake_api: FakeEmbeddingServer) -> None:
    fake_api.dimensions["nomic-embed-text:latest"] = 768
    p = get_provider("ollama", base_url=fake_api.url, model="nomic-embed-text:latest")
    assert p.dimension == 768  # the tag does not hide the known model
    await p.embed(["chunk"])
    await p.embed_query(["question"])
    bodies = [r.body for r in fake_api.requests]
    assert bodies[0] == {
        "model": "nomic-embed-text:latest",
        "input": ["search_document: chunk"],
        "truncate": True,
    }
    assert bodies[1]["input"] == ["search_query: question"]
    assert "authorization" not in fake_api.requests[0].headers  # no key given, none sent


async def test_ollama_host_from_environment(
    fake_api: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", fake_api.url.removeprefix("http://"))
    fake_api.dimensions["all-minilm"] = 384
    p = get_provider("ollama", model="all-minilm")
    assert p.base_url == fake_api.url
    await p.embed(["x"])
    assert fake_api.requests[0].path == "/api/embed"
    # base_url wins over OLLAMA_HOST (the original ignored base_url for Ollama: only OLLAMA_HOST counted)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:1")
    assert get_provider("ollama", base_url=fake_api.url).base_url == fake_api.url


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("example.com", "http://example.com:11434"),
        ("example.com:8080", "http://example.com:8080"),
        ("https://example.com", "https://example.com:443"),
        ("http://[::1]:9999/", "http://[::1]:9999"),
        ("http://host:1234/prefix/", "http://host:1234/prefix"),
    ],
)
def test_ollama_host_rules(value: str, expected: str) -> None:
    assert host_from_env(value) == expected


def test_ollama_default_host() -> None:
    assert get_provider("ollama").base_url == "http://localhost:11434"
