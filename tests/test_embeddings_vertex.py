"""The google provider in Vertex AI mode (``GOOGLE_GENAI_USE_VERTEXAI=true``) against a local fake
Vertex AI ``:predict`` endpoint, with OAuth tokens from the environment or a fake ``gcloud`` on PATH,
and in express mode (an API key)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fake_servers import JsonHandler, Recorded, fake_vector, serving
from memsearch.cli import cli
from memsearch.embeddings import get_provider
from memsearch.embeddings.google import GoogleEmbedding
from memsearch.errors import EmbeddingAPIError, MissingAPIKeyError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


@dataclass
class FakeVertex:
    """Answers ``POST .../publishers/google/models/<model>:predict`` like Vertex AI."""

    url: str = ""
    #: Bearer tokens accepted (empty: any).
    tokens: set[str] = field(default_factory=set)
    requests: list[Recorded] = field(default_factory=list)

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if not path.endswith(":predict") or "/publishers/google/models/" not in path:
            return 404, {"error": {"code": 404, "message": f"no route {path}"}}
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if self.tokens and bearer not in self.tokens and "x-goog-api-key" not in headers:
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials."}}
        dim = (body.get("parameters") or {}).get("outputDimensionality") or 8
        predictions = [
            {
                "embeddings": {
                    "values": fake_vector(item["content"], dim),
                    "statistics": {"token_count": 3, "truncated": False},
                }
            }
            for item in body["instances"]
        ]
        return 200, {"predictions": predictions, "metadata": {"billableCharacterCount": 10}}


@pytest.fixture
def vertex(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeVertex]:
    state = FakeVertex()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.requests.append(Recorded("POST", self.path, headers, body))
            status, answer = state.answer(self.path, headers, body)
            self._send(status, json.dumps(answer).encode())

    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_OAUTH_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}{os.environ['PATH']}")
    with serving(Handler, "fake-vertex") as root:
        state.url = root
        yield state


def fake_gcloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """Put a ``gcloud`` shell script first on PATH; it logs each run to ``calls``."""
    bin_dir = tmp_path / "gcloud-bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(f'#!/bin/sh\necho "$@" >> "{bin_dir}/calls"\n{script}\n')
    gcloud.chmod(gcloud.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir / "calls"


async def test_project_mode_with_a_token_from_the_environment(vertex: FakeVertex, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "tok-env")
    vertex.tokens = {"tok-env"}
    p = get_provider("google", base_url=vertex.url + "/v1")
    assert isinstance(p, GoogleEmbedding) and p.batch_size == 1  # Gemini models: one text per call
    vectors = await p.embed(["first chunk", "second chunk"])
    assert vectors == [fake_vector("first chunk", 768), fake_vector("second chunk", 768)]
    paths = [r.path for r in vertex.requests]
    expected = (
        "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-embedding-001:predict"
    )
    assert paths == [expected, expected]
    first = vertex.requests[0]
    assert first.headers["authorization"] == "Bearer tok-env"
    assert "x-goog-api-key" not in first.headers and "key=" not in first.path
    assert first.body == {
        "instances": [{"content": "first chunk", "task_type": "RETRIEVAL_DOCUMENT"}],
        "parameters": {"outputDimensionality": 768},
    }
    await p.embed_query(["what broke?"])
    assert vertex.requests[-1].body["instances"] == [
        {"content": "what broke?", "task_type": "RETRIEVAL_QUERY"}
    ]
    assert p.cache_namespace == "google:gemini-embedding-001@vertex"


async def test_location_and_batching_of_text_embedding_models(vertex: FakeVertex, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-2")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "t")
    p = get_provider("google", model="text-embedding-005", base_url=vertex.url + "/v1/")
    assert p.batch_size == 32
    texts = [f"chunk {i}" for i in range(40)]
    assert await p.embed(texts) == [fake_vector(t, 768) for t in texts]
    assert [len(r.body["instances"]) for r in vertex.requests] == [32, 8]
    assert vertex.requests[0].path == (
        "/v1/projects/proj-2/locations/europe-west4/publishers/google/models/text-embedding-005:predict"
    )
    assert get_provider("google", model="text-embedding-005", batch_size=5).batch_size == 5


async def test_token_from_gcloud_is_fetched_once_and_refreshed_when_refused(
    vertex: FakeVertex, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-3")
    counter = tmp_path / "n"
    calls = fake_gcloud(
        tmp_path,
        monkeypatch,
        f'n=$(cat "{counter}" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "{counter}"; echo "ya29.tok-$n"',
    )
    vertex.tokens = {"ya29.tok-1"}
    p = get_provider("google", base_url=vertex.url + "/v1")
    await p.embed(["a", "b", "c"])
    assert calls.read_text() == "auth print-access-token\n"  # one gcloud run for three requests
    assert {r.headers["authorization"] for r in vertex.requests} == {"Bearer ya29.tok-1"}

    vertex.tokens = {"ya29.tok-2"}  # the first token expired
    await p.embed(["d"])
    assert calls.read_text().count("print-access-token") == 2
    assert [r.headers["authorization"] for r in vertex.requests[-2:]] == [
        "Bearer ya29.tok-1",
        "Bearer ya29.tok-2",
    ]


async def test_a_refused_environment_token_is_one_error(vertex: FakeVertex, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "stale")
    vertex.tokens = {"fresh"}
    p = get_provider("google", base_url=vertex.url + "/v1")
    with pytest.raises(EmbeddingAPIError) as info:
        await p.embed(["x"])
    assert str(info.value) == "The Vertex AI API rejected the API key (HTTP 401)."
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in info.value.hint and "gcloud auth login" in info.value.hint
    assert len(vertex.requests) == 1


async def test_gcloud_missing_or_failing_names_what_to_set(
    vertex: FakeVertex, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    p = get_provider("google", base_url=vertex.url + "/v1")
    with pytest.raises(MissingAPIKeyError) as info:
        await p.embed(["x"])
    assert "gcloud CLI is not on PATH" in str(info.value)
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in info.value.hint

    fake_gcloud(
        tmp_path,
        monkeypatch,
        'echo "ERROR: (gcloud.auth.print-access-token) You do not have any active account." >&2; exit 1',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'gcloud-bin'}")
    with pytest.raises(MissingAPIKeyError, match="You do not have any active account"):
        await get_provider("google", base_url=vertex.url + "/v1").embed(["x"])
    assert vertex.requests == []


def test_neither_project_nor_key_is_one_clear_error(vertex: FakeVertex) -> None:
    with pytest.raises(MissingAPIKeyError) as info:
        get_provider("google")
    assert "Vertex AI needs a project or an API key" in str(info.value)
    assert "GOOGLE_CLOUD_PROJECT" in info.value.hint and "GOOGLE_API_KEY" in info.value.hint


async def test_express_mode_with_an_api_key(vertex: FakeVertex, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-express")
    p = get_provider("google", base_url=vertex.url + "/v1")
    await p.embed(["x"])
    (request,) = vertex.requests
    assert request.path == "/v1/publishers/google/models/gemini-embedding-001:predict"
    assert request.headers["x-goog-api-key"] == "AIza-express"
    assert "authorization" not in request.headers
    # An explicit key means express mode even with a project set.
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    await get_provider("google", api_key="AIza-2", base_url=vertex.url + "/v1").embed(["y"])
    assert vertex.requests[-1].path == "/v1/publishers/google/models/gemini-embedding-001:predict"
    assert vertex.requests[-1].headers["x-goog-api-key"] == "AIza-2"


def test_cli_index_and_search_on_vertex(vertex: FakeVertex, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-cli")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    calls = fake_gcloud(tmp_path, monkeypatch, 'echo "ya29.cli"')
    vertex.tokens = {"ya29.cli"}
    memory = tmp_path / "memory"
    memory.mkdir()
    for f in EXAMPLES.iterdir():
        (memory / f.name).write_bytes(f.read_bytes())
    flags = ["--provider", "google", "--base-url", vertex.url + "/v1", "--milvus-uri", str(tmp_path / "v.db")]
    runner = CliRunner()
    r = runner.invoke(cli, ["index", str(memory), *flags], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert r.stdout == "Indexed 9 chunks.\n"
    r = runner.invoke(cli, ["search", "watcher", "-j", *flags], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)) == 5
    assert calls.read_text().count("print-access-token") == 2  # once per process (here: per command)
