"""The CLI's commands on exact output (Click's CliRunner), with a real Milvus Lite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsearch.cli import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


@pytest.fixture
def run(tmp_path: Path):
    """Invoke the CLI with the hash embedder and a Milvus Lite database in tmp_path."""
    runner = CliRunner()
    uri = str(tmp_path / "cli.db")

    def invoke(*args: str, store: bool = True, embed: bool = True, input: str | None = None):
        extra: list[str] = []
        if store:
            extra += ["--milvus-uri", uri]
        if embed:
            extra += ["--provider", "hash"]
        return runner.invoke(cli, [*args, *extra], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    for f in EXAMPLES.iterdir():
        (root / f.name).write_bytes(f.read_bytes())
    return root


def test_index_search_expand_roundtrip(run, memory: Path) -> None:
    r = run("index", str(memory))
    assert r.exit_code == 0, r.output
    assert r.stdout == "Indexed 9 chunks.\n"
    assert run("index", str(memory)).stdout == "Indexed 0 chunks.\n"

    r = run("search", "file watcher missed renamed files", "--json-output")
    hits = json.loads(r.stdout)
    assert len(hits) == 5
    assert list(hits[0]) == [
        "content",
        "source",
        "heading",
        "chunk_hash",
        "heading_level",
        "start_line",
        "end_line",
        "score",
        "relevance",  # added after the original's keys
    ]
    top = hits[0]
    assert top["source"] == str(memory / "2026-11-03.md") and top["heading"] == "15:30"

    r = run("expand", top["chunk_hash"], "--json-output", embed=False)
    data = json.loads(r.stdout)
    assert list(data) == ["chunk_hash", "source", "heading", "start_line", "end_line", "content", "anchor"]
    assert data["anchor"] == {
        "session": "a9b8c7d6-e5f4-4321-8765-0fedcba98765",
        "turn": "99887766-5544-4332-8110-ffeeddccbbaa",
        "transcript": "/home/dev/.claude/projects/-home-dev-shop/a9b8c7d6-e5f4-4321-8765-0fedcba98765.jsonl",
    }
    assert data["content"].startswith("### 15:30\n") and "on_moved" in data["content"]

    text = run("expand", top["chunk_hash"], embed=False).stdout
    assert text.startswith(
        f"Source: {memory / '2026-11-03.md'} (lines {data['start_line']}-{data['end_line']})\n"
    )
    assert "Heading: 15:30\nSession: a9b8c7d6-e5f4-4321-8765-0fedcba98765  Turn: 99887766" in text


def test_search_plain_output(run, memory: Path) -> None:
    run("index", str(memory))
    out = run("search", "blue/green deploys nginx", "--top-k", "1").stdout
    lines = out.splitlines()
    assert lines[0] == ""
    assert lines[1].startswith("--- Result 1 (score: ") and lines[1].endswith(") ---")
    assert lines[2] == f"Source: {memory / 'decisions.md'}"
    assert lines[3] == "Heading: Deployment"


def test_search_truncates_long_content_with_expand_hint(run, tmp_path: Path) -> None:
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / "a.md").write_text("# Long\n\n" + "word " * 200 + "\n")
    run("index", str(tmp_path / "long"))
    out = run("search", "word").stdout
    assert "  ... [truncated, run 'memsearch expand " in out


def test_search_empty_index_says_no_results(run, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    run("index", str(tmp_path / "empty"))
    assert run("search", "anything").stdout == "No results found.\n"
    assert run("search", "anything", "-j").stdout == "[]\n"


def test_stats_and_reset(run, memory: Path) -> None:
    run("index", str(memory))
    assert run("stats", embed=False).stdout == "Total indexed chunks: 9\n"
    r = run("reset", embed=False, input="n\n")
    assert r.exit_code == 1 and run("stats", embed=False).stdout == "Total indexed chunks: 9\n"
    assert run("reset", "--yes", embed=False).stdout == "Dropped collection.\n"
    r = run("stats", embed=False)
    assert r.exit_code == 1 and r.stderr.startswith("Error: ")
    assert run("index", str(memory)).stdout == "Indexed 9 chunks.\n"
    assert run("reset", "-y", embed=False).stdout == "Dropped collection.\n"


def test_expand_modes(run, tmp_path: Path) -> None:
    doc = tmp_path / "d"
    doc.mkdir()
    (doc / "a.md").write_text("# Title\nintro\n\n## A\ntext a\n\n### A1\nsub\n\n## B\ntext b\n")
    run("index", str(doc))
    hits = json.loads(run("search", "text a", "-j", "-k", "10").stdout)
    a = next(h for h in hits if h["heading"] == "A")
    section = json.loads(run("expand", a["chunk_hash"], "-j", embed=False).stdout)
    assert (section["start_line"], section["end_line"]) == (4, 9)
    assert section["content"] == "## A\ntext a\n\n### A1\nsub\n"
    own = json.loads(run("expand", a["chunk_hash"], "--no-section", "-j", embed=False).stdout)
    assert own["content"] == "## A\ntext a\n"
    ctx = json.loads(run("expand", a["chunk_hash"], "--lines", "2", "-j", embed=False).stdout)
    assert (ctx["start_line"], ctx["end_line"]) == (2, 8)
    assert ctx["content"] == "intro\n\n## A\ntext a\n\n### A1\nsub"


def test_index_reports_failed_files_and_exits_1(run, memory: Path) -> None:
    (memory / "bad.md").write_bytes(b"\x00\x00binary\x00")
    r = run("index", str(memory))
    assert r.exit_code == 1
    assert r.stdout == "Indexed 9 chunks.\n"
    assert f"Failed: {memory / 'bad.md'}: " in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: 1 file could not be indexed")


def test_default_collection_on_every_store_command(run, memory: Path) -> None:
    """The original's plugins pass --default-collection to index, search, expand, stats, reset and
    refuse a CLI without it; --collection (and config files) still win over it."""
    dc = ("--default-collection", "ms_plugin_1")
    assert run("index", str(memory), *dc).stdout == "Indexed 9 chunks.\n"
    assert run("stats", "--collection", "ms_plugin_1", embed=False).stdout == "Total indexed chunks: 9\n"
    hits = json.loads(run("search", "file watcher", "--json-output", *dc).stdout)
    assert hits
    r = run("expand", hits[0]["chunk_hash"], *dc)
    assert r.exit_code == 0 and hits[0]["source"] in r.stdout
    assert run("stats", *dc, embed=False).stdout == "Total indexed chunks: 9\n"
    # An explicit --collection beats the default: a different, empty collection.
    assert run("index", str(memory), *dc, "--collection", "other").stdout == "Indexed 9 chunks.\n"
    assert run("reset", "--yes", *dc, embed=False).exit_code == 0
    assert run("stats", "--collection", "other", embed=False).stdout == "Total indexed chunks: 9\n"
