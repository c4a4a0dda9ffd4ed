"""The remote Jev reranker (``reranker.model = "jev:<model>"``) against a local fake Jev server."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fake_jev import FakeJev, fake_jev  # noqa: F401  (fixture)
from memsearch.cli import cli
from memsearch.errors import (
    ConfigValueError,
    InvalidRerankAnswerError,
    MissingRerankerKeyError,
    RerankerAPIError,
    RerankerError,
)
from memsearch.jev_reranker import CRITERIA, DEFAULT_URL, JevReranker, endpoint
from memsearch.reranker import rerank

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


@pytest.fixture
def jev_env(fake_jev: FakeJev, monkeypatch: pytest.MonkeyPatch) -> FakeJev:  # noqa: F811
    monkeypatch.setenv("MEMSEARCH_JEV_URL", fake_jev.url)
    monkeypatch.setenv("TYPESAFE_API_KEY", "test-key")
    return fake_jev


def candidates() -> list[dict[str, object]]:
    return [
        {"content": "long memory " * 2000 + "alpha", "source": "a.md", "score": 0.9},
        {"content": "beta", "source": "b.md", "chunk_hash": "b", "score": 0.8},
        {"content": "gamma", "source": "c.md", "score": 0.7},
        {"content": "delta", "source": "d.md", "score": 0.6},
    ]


@pytest.mark.parametrize("model", ["jev-latest", "jev-1.13.0"])
def test_one_request_with_every_candidate_untruncated(jev_env: FakeJev, model: str) -> None:
    jev_env.scores = [("beta", 0.8), ("gamma", 0.8), ("alpha", 0.2)]
    given = candidates()
    before = copy.deepcopy(given)
    ranked = rerank("question", given, model_name=f"jev:{model}", top_k=2)
    assert [r["source"] for r in ranked] == ["b.md", "c.md"]  # a tie keeps the search order
    assert [r["score"] for r in ranked] == [0.8, 0.8]
    assert ranked[0]["chunk_hash"] == "b"
    assert given == before  # copies, never the caller's dicts

    (request,) = jev_env.requests
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["content-type"] == "application/json"
    body = request.body
    assert body["model"] == model
    assert body["state"] == {"query_excerpt": "question"}
    assert list(body["questions"]) == ["d0", "d1", "d2", "d3"]
    for i, question in enumerate(body["questions"].values()):
        assert question["type"] == "noul"
        assert question["instructions"].endswith(given[i]["content"])
        assert question["criteria"] == CRITERIA and set(CRITERIA) == {"true", "false"}


def test_all_candidates_without_top_k_and_ties_in_order(jev_env: FakeJev) -> None:
    jev_env.default = 0.5
    jev_env.scores = [("delta", 0.9)]
    ranked = JevReranker().rerank("q", candidates())
    assert [r["source"] for r in ranked] == ["d.md", "a.md", "b.md", "c.md"]
    assert [r["score"] for r in ranked] == [0.9, 0.5, 0.5, 0.5]


def test_evaluate_returns_the_answer_with_the_resolved_model(jev_env: FakeJev) -> None:
    result = JevReranker().evaluate("question", ["memory"])
    assert result["model"] == "jev-1.13.0" and result["answers"] == {"d0": {"type": "noul", "noul": 0.1}}
    assert jev_env.requests[0].body["model"] == "jev-latest"


def test_no_candidates_need_no_key_and_no_request(fake_jev: FakeJev, monkeypatch) -> None:  # noqa: F811
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    monkeypatch.setenv("MEMSEARCH_JEV_URL", fake_jev.url)
    assert rerank("q", [], model_name="jev:jev-latest", top_k=3) == []
    assert fake_jev.requests == []


def test_missing_key_names_the_variable(fake_jev: FakeJev, monkeypatch) -> None:  # noqa: F811
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    monkeypatch.setenv("MEMSEARCH_JEV_URL", fake_jev.url)
    with pytest.raises(MissingRerankerKeyError) as info:
        JevReranker().rerank("q", [{"content": "x"}])
    assert str(info.value) == "The Jev reranker needs an API key: TYPESAFE_API_KEY is not set."
    assert "TYPESAFE_API_KEY" in info.value.hint
    assert fake_jev.requests == []


def test_endpoint_defaults_to_typesafe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSEARCH_JEV_URL", raising=False)
    assert endpoint() == DEFAULT_URL == "https://api.typesafe.ai/v1/systemone"
    monkeypatch.setenv("MEMSEARCH_JEV_URL", "http://127.0.0.1:9/v1/systemone")
    assert JevReranker().url == "http://127.0.0.1:9/v1/systemone"


def _answers(scores: list[object]) -> dict[str, object]:
    return {f"d{i}": {"type": "noul", "noul": s} for i, s in enumerate(scores)}


@pytest.mark.parametrize(
    ("answers", "detail"),
    [
        ("nope", "no 'answers' object"),
        (_answers([0.5]), "missing d1"),
        (_answers([0.5, 0.5, 0.5]), "unexpected d2"),
        (
            {"d0": {"type": "noul", "noul": 0.5}, "x": {"type": "noul", "noul": 0.5}},
            "missing d1; unexpected x",
        ),
        (
            {"d0": {"type": "choice", "noul": 0.5}, "d1": {"type": "noul", "noul": 0.5}},
            "answer type 'choice' for d0",
        ),
        ({"d0": 0.5, "d1": {"type": "noul", "noul": 0.5}}, "answer type 'float' for d0"),
        (_answers([None, 0.5]), "no finite numeric score (None)"),
        (_answers([True, 0.5]), "no finite numeric score (True)"),
        (_answers(["0.5", 0.5]), "no finite numeric score ('0.5')"),
        (_answers([-0.1, 0.5]), "outside [0, 1] (-0.1)"),
        (_answers([0.5, 1.1]), "outside [0, 1] (1.1)"),
    ],
)
def test_invalid_answers_fail(jev_env: FakeJev, answers: object, detail: str) -> None:
    jev_env.answers = answers
    with pytest.raises(InvalidRerankAnswerError) as info:
        JevReranker().rerank("q", [{"content": "a"}, {"content": "b"}])
    assert detail in str(info.value)
    assert str(info.value).startswith(f"The Jev reranking endpoint at {jev_env.url} sent an invalid answer")


@pytest.mark.parametrize("score", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scores_fail(score: float) -> None:
    # JSON cannot carry these, but a lenient server's parser can produce them.
    with pytest.raises(InvalidRerankAnswerError, match="no finite numeric score"):
        JevReranker.scores({"answers": _answers([score])}, 1)


@pytest.mark.parametrize(
    ("status", "expected", "hint"),
    [
        (401, "The Jev API rejected the API key (HTTP 401).", "TYPESAFE_API_KEY"),
        (400, "reranking API at {url} returned HTTP 400: bad model", "reranker.model"),
        (429, "reranking API at {url} returned HTTP 429: bad model", "rate-limiting"),
        (503, "reranking API at {url} returned HTTP 503: bad model", "also on one retry"),
    ],
)
def test_http_errors_fail_with_the_status(jev_env: FakeJev, status: int, expected: str, hint: str) -> None:
    jev_env.status = (status, "bad model")
    with pytest.raises(RerankerAPIError) as info:
        JevReranker(api_key="secret-key").rerank("q", [{"content": "text"}])
    assert expected.format(url=jev_env.url) in str(info.value)
    assert hint in info.value.hint
    assert "secret-key" not in info.value.one_line()
    assert len(jev_env.requests) == (2 if status in (429, 503) else 1)  # one retry of a transient failure


def test_unreachable_endpoint_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "k")
    with pytest.raises(RerankerAPIError, match="Could not connect to the Jev reranking endpoint"):
        JevReranker(url="http://127.0.0.1:9/v1/systemone").rerank("q", [{"content": "x"}])


def test_a_silent_server_times_out(jev_env: FakeJev) -> None:
    jev_env.hang.set()
    started = time.monotonic()
    with pytest.raises(RerankerAPIError) as info:
        JevReranker(timeout=0.5).rerank("q", [{"content": "x"}])
    assert time.monotonic() - started < 2.0
    assert str(info.value) == f"The Jev reranking endpoint at {jev_env.url} did not answer within 0.5 s."


def test_invalid_configuration() -> None:
    with pytest.raises(ConfigValueError):
        JevReranker(model="")
    with pytest.raises(ConfigValueError):
        JevReranker(timeout=0)
    with pytest.raises(ConfigValueError):
        JevReranker(url="http://unused").rerank("q", [], top_k=-1)
    with pytest.raises(ConfigValueError, match="needs a model name"):
        rerank("q", [{"content": "x"}], model_name="jev:")
    assert issubclass(RerankerAPIError, RerankerError) and issubclass(InvalidRerankAnswerError, ValueError)


# --- through the CLI, on a real Milvus Lite -----------------------------------------------------


@pytest.fixture
def cli_run(tmp_path: Path):
    runner = CliRunner()
    uri = str(tmp_path / "jev.db")
    memory = tmp_path / "memory"
    memory.mkdir()
    for f in EXAMPLES.iterdir():
        (memory / f.name).write_bytes(f.read_bytes())

    def invoke(*args: str):
        return runner.invoke(cli, [*args, "--milvus-uri", uri, "--provider", "hash"], catch_exceptions=False)

    assert invoke("index", str(memory)).exit_code == 0
    return invoke


def test_cli_search_reranks_with_jev(cli_run, jev_env: FakeJev) -> None:
    plain = json.loads(cli_run("search", "file watcher missed renamed files", "-k", "2", "-j").stdout)
    assert jev_env.requests == []
    jev_env.scores = [("## Coding conventions", 0.95), ("### 15:30", 0.6)]  # the 6th candidate first
    r = cli_run(
        "search", "file watcher missed renamed files", "-k", "2", "-j", "--reranker-model", "jev:jev-1.13.0"
    )
    assert r.exit_code == 0, r.output
    hits = json.loads(r.stdout)
    (request,) = jev_env.requests
    assert request.body["model"] == "jev-1.13.0"
    assert request.body["state"] == {"query_excerpt": "file watcher missed renamed files"}
    # the reranker sees a fixed 30 hybrid candidates whatever -k is (rank once, cut late): here every
    # one of the 9 chunks
    assert len(request.body["questions"]) == 9
    assert [h["heading"] for h in hits] == ["Coding conventions", "15:30"]
    assert [h["score"] for h in hits] == [0.95, 0.6]
    assert hits[1]["chunk_hash"] == plain[0]["chunk_hash"]


def test_cli_search_jev_failure_is_one_error_line(cli_run, jev_env: FakeJev, monkeypatch) -> None:
    jev_env.status = (401, "no")
    r = cli_run("search", "watcher", "--reranker-model", "jev:jev-latest")
    assert r.exit_code == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: The Jev API rejected the API key (HTTP 401).")
    assert "Hint: Set TYPESAFE_API_KEY" in lines[0]

    monkeypatch.delenv("TYPESAFE_API_KEY")
    r = cli_run("search", "watcher", "--reranker-model", "jev:jev-latest")
    assert r.exit_code == 1
    assert r.stderr.startswith(
        "Error: The Jev reranker needs an API key: TYPESAFE_API_KEY is not set. Hint: Set TYPESAFE_API_KEY"
    )


async def test_memsearch_api_reranks_with_jev(jev_env: FakeJev, tmp_path: Path) -> None:
    from memsearch.core import MemSearch

    memory = tmp_path / "notes"
    memory.mkdir()
    for i in range(5):
        (memory / f"n{i}.md").write_text(f"## Note {i}\n\nbackup job number {i} finished\n")
    jev_env.scores = [("Note 3", 0.7), ("Note 1", 0.9)]
    with MemSearch(
        [memory],
        embedding_provider="hash",
        milvus_uri=str(tmp_path / "api.db"),
        reranker_model="jev:jev-latest",
        embedding_cache=False,
    ) as ms:
        await ms.index()
        hits = await ms.search("backup job", top_k=1)
    assert [(h["heading"], h["score"]) for h in hits] == [("Note 1", 0.9)]
    assert len(jev_env.requests[0].body["questions"]) == 5  # every chunk: fewer than the 30 candidates
