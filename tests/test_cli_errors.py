"""Every expected failure: one ``Error: ...`` line with a hint, a non-zero exit, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsearch.cli import COMMANDS, HIDDEN_COMMANDS, cli


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nSome text about \"quoted\" things and source == 'x'.\n")
    return root


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_one_error(result, *fragments: str) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert "Hint:" in errors[0] or "Usage" in result.stderr
    return errors[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unknown_provider(notes: Path, tmp_path: Path) -> None:
    r = invoke("index", str(notes), "--provider", "nope", "--milvus-uri", str(tmp_path / "m.db"))
    line = assert_one_error(r, "Unknown embedding provider 'nope'", "onnx", "openai")
    assert "Available:" in line


def test_missing_model(notes: Path, tmp_path: Path) -> None:
    r = invoke(
        "index",
        str(notes),
        "--provider",
        "onnx",
        "--model",
        str(tmp_path / "no-such-model"),
        "--milvus-uri",
        str(tmp_path / "m.db"),
    )
    assert_one_error(r, "no-such-model")


def test_unreachable_endpoint(notes: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    r = invoke(
        "index",
        str(notes),
        "--provider",
        "openai",
        "--model",
        "text-embedding-3-small",
        "--base-url",
        url,
        "--api-key",
        "sk-test",
        "--milvus-uri",
        str(tmp_path / "m.db"),
    )
    assert_one_error(r, "127.0.0.1")


def test_missing_api_key(notes: Path, tmp_path: Path) -> None:
    r = invoke("index", str(notes), "--provider", "openai", "--milvus-uri", str(tmp_path / "m.db"))
    assert_one_error(r, "OPENAI_API_KEY")


def test_dimension_mismatch_after_model_change_says_how_to_reindex(notes: Path, tmp_path: Path) -> None:
    uri = str(tmp_path / "m.db")
    assert invoke("index", str(notes), "--provider", "hash", "--milvus-uri", uri).exit_code == 0
    r = invoke("search", "text", "--provider", "onnx", "--milvus-uri", uri)
    assert_one_error(r, "dimension", "memsearch reset")


def test_malformed_toml(notes: Path, tmp_path: Path) -> None:
    cfg = Path.home() / ".memsearch" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[embedding\nprovider = 'onnx'\n")
    r = invoke("index", str(notes), "--milvus-uri", str(tmp_path / "m.db"))
    assert_one_error(r, str(cfg))


def test_unset_env_reference(notes: Path, tmp_path: Path) -> None:
    cfg = Path.home() / ".memsearch" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('[embedding]\nprovider = "openai"\napi_key = "env:MEMSEARCH_TEST_UNSET"\n')
    r = invoke("search", "x", "--milvus-uri", str(tmp_path / "m.db"))
    assert_one_error(r, "MEMSEARCH_TEST_UNSET")


@pytest.mark.parametrize("bad", ["not-hex!", "zz12", "' or chunk_hash != '", ""])
def test_expand_rejects_non_hex_hash(bad: str, tmp_path: Path) -> None:
    r = invoke("expand", bad, "--milvus-uri", str(tmp_path / "m.db"))
    assert_one_error(r, "chunk hash")


def test_expand_unknown_hash(notes: Path, tmp_path: Path) -> None:
    uri = str(tmp_path / "m.db")
    invoke("index", str(notes), "--provider", "hash", "--milvus-uri", uri)
    r = invoke("expand", "0123456789abcdef", "--milvus-uri", uri)
    assert_one_error(r, "Chunk not found: 0123456789abcdef")


def test_expand_source_deleted(notes: Path, tmp_path: Path) -> None:
    import json

    uri = str(tmp_path / "m.db")
    invoke("index", str(notes), "--provider", "hash", "--milvus-uri", uri)
    hit = json.loads(invoke("search", "text", "-j", "--provider", "hash", "--milvus-uri", uri).stdout)[0]
    (notes / "a.md").unlink()
    r = invoke("expand", hit["chunk_hash"], "--milvus-uri", uri)
    assert_one_error(r, "Source file not found")


@pytest.mark.parametrize("query", ['"quoted"', "source == 'x'", 'a" or source != "b', "\\", "%_%"])
def test_queries_with_quotes_and_filter_syntax(query: str, notes: Path, tmp_path: Path) -> None:
    uri = str(tmp_path / "m.db")
    invoke("index", str(notes), "--provider", "hash", "--milvus-uri", uri)
    r = invoke(
        "search",
        query,
        "-j",
        "--provider",
        "hash",
        "--milvus-uri",
        uri,
        "--source-prefix",
        str(notes) + '" or source != "',
    )
    assert r.exit_code == 0 and r.stdout == "[]\n"
    r = invoke(
        "search", query, "-j", "--provider", "hash", "--milvus-uri", uri, "--source-prefix", str(notes)
    )
    assert r.exit_code == 0 and len(__import__("json").loads(r.stdout)) == 1


def test_real_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    """Through the installed console entry (a real process), an error is one line and exit 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "expand", "zz", "--milvus-uri", str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("Error: ")


def test_help_imports_no_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from memsearch.cli import main\n"
        "sys.argv = ['memsearch', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('pymilvus', 'onnxruntime', 'openai', 'numpy') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in proc.stderr
    for name in ("index", "search", "expand", "stats", "reset", "config"):
        assert f"  {name} " in proc.stdout


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - HIDDEN_COMMANDS))
def test_every_command_has_help_and_is_documented(command: str) -> None:
    r = invoke(command, "--help")
    assert r.exit_code == 0 and "Usage: " in r.stdout
    docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"## `memsearch {command}`" in docs


@pytest.mark.parametrize(
    "command",
    [
        ["search", "anything", "--provider", "hash"],
        ["stats"],
        ["expand", "0123456789abcdef"],
        ["search", "anything", "--provider", "hash", "--collection", "other"],
    ],
)
def test_reads_of_a_missing_store_fail_and_create_nothing(
    tmp_path: Path, notes: Path, command: list[str]
) -> None:
    """As in the original: a read of a store or collection that does not exist exits 1 with one
    line and leaves nothing behind (no database directory, no empty collection)."""
    db = tmp_path / "store" / "m.db"
    result = invoke(*command, "--milvus-uri", str(db))
    assert_one_error(result, "No collection", str(db))
    assert result.exit_code == 1
    assert not (tmp_path / "store").exists()
    if "other" in command:  # an existing database without that collection gains nothing either
        invoke("index", str(notes), "--provider", "hash", "--milvus-uri", str(db))
        assert_one_error(invoke(*command, "--milvus-uri", str(db)), "No collection 'other'")
        assert invoke("stats", "--collection", "other", "--milvus-uri", str(db)).exit_code == 1
    # reset of nothing is a no-op that creates nothing, like the original's
    assert invoke("reset", "--yes", "--milvus-uri", str(tmp_path / "none" / "m.db")).exit_code == 0
    assert not (tmp_path / "none").exists()


def test_reset_without_yes_and_without_stdin_is_one_error(tmp_path: Path) -> None:
    """With stdin closed (a cron job, a hook) there is nobody to ask: one line saying --yes."""
    import os

    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "reset", "--milvus-uri", str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.close(0),
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "Error: reset needs a yes, and there is no input to read one from. "
        f"Hint: run `memsearch reset --yes --milvus-uri {tmp_path / 'm.db'}` to drop the collection "
        "without asking"
    ]


def test_index_of_an_explicit_non_markdown_file_says_it_was_skipped(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("plain text", encoding="utf-8")
    result = invoke(
        "index", str(tmp_path / "notes.txt"), "--provider", "hash", "--milvus-uri", str(tmp_path / "m.db")
    )
    assert result.exit_code == 0
    assert result.stdout == "Indexed 0 chunks.\n"
    assert result.stderr == (
        f"Warning: skipped {tmp_path / 'notes.txt'}: not a markdown file (only .md, .markdown are indexed)\n"
    )
