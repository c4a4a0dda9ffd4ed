"""Remote providers keep one connection per instance (per event loop for the openai SDK's client).

Counted at real local servers (``fake_servers.CountingServer`` counts the TCP connections it
accepts and sees closed): many calls use one connection; an asyncio client is bound to its loop (a
new loop gets a new client, the old one is closed with its loop); ``close()`` closes what is open;
a server that drops idle connections costs a reconnect, never an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fake_jev import FakeJev, fake_jev  # noqa: F401  (fixture)
from fake_llm_server import FakeLLMServer, fake_llm  # noqa: F401  (fixture)
from fake_servers import CountingServer, FakeEmbeddingServer, fake_api, server_at  # noqa: F401
from memsearch import MemSearch
from memsearch.embeddings import EmbeddingProvider, get_provider
from memsearch.errors import EmbeddingAPIError
from memsearch.jev_reranker import JevReranker
from memsearch.llm import LLMClient

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"

#: provider -> the base URL suffix of the fake server's route for it.
PROVIDERS = {"openai": "/v1", "ollama": "", "voyage": "/v1", "google": "/v1beta"}


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def openai_memsearch(api: FakeEmbeddingServer, tmp_path: Path) -> MemSearch:
    return MemSearch(
        [EXAMPLES],
        embedding_provider="openai",
        embedding_model="m",
        embedding_base_url=f"{api.url}/v1",
        milvus_uri=str(tmp_path / "m.db"),
        embedding_cache=False,
    )


def provider_for(name: str, api: FakeEmbeddingServer) -> EmbeddingProvider:
    return get_provider(name, model="m", base_url=api.url + PROVIDERS[name], api_key="k")


async def queries(provider: EmbeddingProvider, count: int) -> None:
    for i in range(count):
        vectors = await provider.embed_query([f"query {i}"])
        assert len(vectors) == 1


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_twenty_queries_use_one_connection_closed_by_close(
    name: str,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    server = server_at(fake_api.url)
    provider = provider_for(name, fake_api)
    asyncio.run(queries(provider, 20))
    assert server.opened == 1
    assert len(fake_api.requests) == 20
    provider.close()
    wait_for(lambda: server.closed == 1)
    asyncio.run(queries(provider, 2))  # usable after close: it connects again
    assert server.opened == 2
    provider.close()
    wait_for(lambda: server.closed == 2)


def test_the_sdk_client_is_bound_to_its_loop(fake_api: FakeEmbeddingServer) -> None:  # noqa: F811
    server = server_at(fake_api.url)
    provider = provider_for("openai", fake_api)
    asyncio.run(queries(provider, 5))
    assert server.opened == 1
    wait_for(lambda: server.closed == 1)  # closed with its loop (asyncio.run shuts it down)
    asyncio.run(queries(provider, 5))  # a new loop: a new client, never the dead loop's
    assert server.opened == 2

    # A loop that outlives the call and is closed later, without a shutdown of its generators.
    loop = asyncio.new_event_loop()
    loop.run_until_complete(queries(provider, 3))
    assert server.opened == 3
    provider.close()  # closed on its own (idle) loop
    wait_for(lambda: server.closed == 3)
    loop.close()


def test_the_stdlib_client_is_shared_by_loops_and_threads(
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    server = server_at(fake_api.url)
    provider = provider_for("ollama", fake_api)
    for _ in range(4):
        asyncio.run(queries(provider, 5))
    assert server.opened == 1
    provider.close()


async def test_one_connection_per_loop_inside_a_running_loop(
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    server = server_at(fake_api.url)
    provider = provider_for("openai", fake_api)
    await asyncio.gather(*(queries(provider, 5) for _ in range(1)))
    await queries(provider, 10)
    assert server.opened == 1
    provider.close()  # a sync close from a coroutine on the client's own loop: closed there, soon
    for _ in range(500):
        if server.closed == 1:
            break
        await asyncio.sleep(0.01)
    assert server.closed == 1


@pytest.mark.parametrize("name", ["openai", "ollama"])
def test_a_server_that_drops_idle_connections_costs_a_reconnect_not_an_error(
    name: str,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    server = server_at(fake_api.url)
    server.drop_after_answer = True
    provider = provider_for(name, fake_api)

    async def run() -> None:
        for i in range(5):
            await queries(provider, 1)
            while server.closed < i + 1:  # the server has dropped the connection we hold
                await asyncio.sleep(0.01)

    asyncio.run(run())
    assert server.opened == 5
    assert len(fake_api.requests) == 5  # each request sent once: no failed attempt on a dead socket
    provider.close()


def test_memsearch_search_keeps_the_connection(tmp_path: Path, fake_api: FakeEmbeddingServer) -> None:  # noqa: F811
    server = server_at(fake_api.url)
    ms = openai_memsearch(fake_api, tmp_path)
    try:
        assert asyncio.run(ms.index()) > 0
        indexed = server.opened

        async def searches() -> None:
            for i in range(20):
                assert await ms.search(f"what did we decide {i}", top_k=3)

        asyncio.run(searches())
        assert server.opened == indexed + 1
    finally:
        ms.close()
    wait_for(lambda: server.closed == server.opened)


@pytest.mark.parametrize("backend", ["openai", "anthropic", "gemini"])
async def test_an_llm_client_keeps_one_connection(backend: str, fake_llm: FakeLLMServer) -> None:  # noqa: F811
    server = server_at(fake_llm.url)
    base_url = f"{fake_llm.url}/v1" if backend == "openai" else fake_llm.url
    async with LLMClient(backend, base_url=base_url, api_key="k") as llm:
        for _ in range(5):
            assert await llm.complete("summarise") == fake_llm.default_reply
    assert server.opened == 1
    for _ in range(500):
        if server.closed == 1:
            break
        await asyncio.sleep(0.01)
    assert server.closed == 1


def test_jev_rerankers_share_one_connection(fake_jev: FakeJev, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("MEMSEARCH_JEV_URL", fake_jev.url)
    monkeypatch.setenv("TYPESAFE_API_KEY", "test-key")
    server = server_at(fake_jev.url)
    for _ in range(5):  # a search builds a reranker per query
        ranked = JevReranker().rerank("q", [{"content": "a"}, {"content": "b"}])
        assert len(ranked) == 2
    assert server.opened == 1
    assert len(fake_jev.requests) == 5


def test_requests_go_through_the_proxy_variables_like_urllib(
    fake_api: FakeEmbeddingServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``http_proxy`` (with credentials) is honoured, ``no_proxy`` bypasses it, as urllib does."""
    proxy = fake_api.url.replace("http://", "http://user:p%40ss@")
    monkeypatch.setenv("http_proxy", proxy)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.setenv("no_proxy", "direct.invalid")
    provider = get_provider("ollama", model="m", base_url="http://upstream.invalid:1234")
    asyncio.run(queries(provider, 2))
    first, second = fake_api.requests  # the "proxy" (our fake) answered both, on one connection
    assert first.path == second.path == "http://upstream.invalid:1234/api/embed"
    assert first.headers["proxy-authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss
    assert server_at(fake_api.url).opened == 1
    provider.close()

    bypassed = get_provider("ollama", model="m", base_url="http://direct.invalid:1234")
    with pytest.raises(EmbeddingAPIError, match="Could not connect"):
        asyncio.run(queries(bypassed, 1))  # straight to a host that does not exist
    assert len(fake_api.requests) == 2


async def test_aclose_closes_the_running_loops_client_before_it_returns(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """What the memory service does when it stops: ``await ms.aclose()`` on the engine loop."""
    server = server_at(fake_api.url)
    ms = openai_memsearch(fake_api, tmp_path)
    await ms.embedder.embed_query(["q"])
    assert server.opened == 1
    await ms.aclose()
    await asyncio.to_thread(wait_for, lambda: server.closed == 1)
    await ms.embedder.embed_query(["again"])  # usable after aclose: a new client, a new connection
    assert server.opened == 2
    await ms.aclose()
