"""The second hour: mistakes a user makes once past the first steps, each as the exact command and
the clear answer it must get (issue 38, items 7-16).

Real parts throughout: ``python -m memsearch`` processes (tests/cli_process.py), signals sent to
them, answers fed to their stdin, Milvus Lite, the real ONNX model where the search matters; the
only fake is a remote embedding API (tests/fake_servers.py) where a run must be slow enough to be
interrupted part way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, fake_api
from memsearch.chunker import chunk_markdown
from memsearch.config import global_config_path, load_config_file

__all__ = ["fake_api"]  # the fixture, used by name


def _one_error(stderr: str) -> str:
    """The single ``Error:`` line a failed command printed (and nothing like a traceback)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "Traceback" not in stderr and "Aborted!" not in stderr
    return lines[0]


# --- 7. Ctrl-C during index, and config init cut off -------------------------------------------


def _notes(root: Path, files: int) -> Path:
    notes = root / "notes"
    notes.mkdir()
    for i in range(files):
        (notes / f"n{i:02}.md").write_text(
            f"# Runbook {i}\n\nStep {i}: restart the export worker number {i}.\n\n"
            f"## Why {i}\n\nThe queue of worker {i} fills when the disk is full.\n",
            encoding="utf-8",
        )
    return notes


def _embedded_texts(api: FakeEmbeddingServer) -> int:
    return sum(len(r.body["input"]) for r in list(api.requests) if r.path.endswith("/api/embed"))


def test_ctrl_c_during_index_says_what_was_kept_and_a_rerun_finishes(
    fake_api: FakeEmbeddingServer, tmp_path: Path
) -> None:
    notes = _notes(tmp_path, 30)
    total = sum(len(chunk_markdown(p.read_text(encoding="utf-8"), str(p))) for p in notes.glob("*.md"))
    args = [
        "index", str(notes), "--provider", "ollama", "--model", "m", "--base-url", fake_api.url,
        "--batch-size", "4", "--milvus-uri", str(tmp_path / "m.db"),
    ]  # fmt: skip
    fake_api.delay(0.2)  # ~15 requests of 4 texts: a few seconds to interrupt
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while _embedded_texts(fake_api) < 16 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    line = _one_error(err)
    assert line.startswith("Error: index interrupted: the files finished so far are indexed")
    assert "kept in the embedding cache" in line and "run the same command again to finish" in line
    before = _embedded_texts(fake_api)
    assert before < total

    fake_api.delay(0)
    again = memsearch(*args)
    assert again.returncode == 0, again.stderr
    assert 0 < _embedded_texts(fake_api) - before < total  # only what the first run had not embedded
    flags = ["--milvus-uri", str(tmp_path / "m.db")]
    assert memsearch("stats", *flags).stdout.strip() == f"Total indexed chunks: {total}"
    assert memsearch(*args).stdout.strip() == "Indexed 0 chunks."  # the store is whole: nothing left


def test_config_init_cut_off_by_end_of_input_writes_nothing_and_says_so() -> None:
    path = global_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[chunking]\nmax_chunk_size = 900\n", encoding="utf-8")
    result = memsearch("config", "init", input="\ny\nopenai\n")  # stdin ends inside Embedding
    assert result.returncode == 1
    line = _one_error(result.stderr)
    assert line.startswith("Error: config init stopped before its last question (end of input, or Ctrl-C)")
    assert f"nothing was written to {path}" in line and "an empty line keeps a value" in line
    assert load_config_file(path) == {"chunking": {"max_chunk_size": 900}}


def test_ctrl_c_at_a_config_init_question_writes_nothing_and_says_so() -> None:
    wizard = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "config", "init"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wizard.stdout is not None
    shown = ""
    while not shown.endswith("]: "):  # the first question waits for its answer
        char = wizard.stdout.read(1)
        assert char, shown
        shown += char
    wizard.send_signal(signal.SIGINT)
    _out, err = wizard.communicate(timeout=60)
    assert wizard.returncode == 1
    assert _one_error(err).startswith("Error: config init stopped before its last question")
    assert not global_config_path().exists()


# --- 8. config set: names, shapes and negative numbers ------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        (
            "embedding.provider",
            "onxx",
            "Error: Invalid value for 'embedding.provider': unknown embedding provider 'onxx'. Hint: did "
            "you mean 'onnx'? Use one of: google, jina, local, mistral, ollama, onnx, openai, use, voyage.",
        ),
        (
            "milvus.uri",
            "notadb",
            "Error: Invalid value for 'milvus.uri': not a Milvus Lite database path: {cwd}/notadb (it must "
            "end in .db). Hint: Use a path like ~/.memsearch/milvus.db, or a server URI starting with "
            "http://, https://, tcp://, unix:.",
        ),
        (
            "redact.notes",
            "wran",
            "Error: Invalid value for 'redact.notes': unknown mode 'wran'. Hint: did you mean 'warn'? Use "
            "one of: redact, skip, warn.",
        ),
        (
            "watch.debounce_ms",
            "-5",
            "Error: Invalid value for 'watch.debounce_ms': must be >= 0 (got -5). Hint: Use a value from 0 "
            "to 3600000.",
        ),
    ],
)
def test_config_set_refuses_what_every_later_command_would_fail_on(
    isolated_env: Path, key: str, value: str, error: str
) -> None:
    result = memsearch("config", "set", key, value)
    assert result.returncode == 1
    assert _one_error(result.stderr) == error.format(cwd=isolated_env)
    assert not global_config_path().exists()
    (isolated_env / "empty").mkdir()
    after = memsearch("index", "empty")  # nothing was written that breaks the next command
    assert after.returncode == 0, after.stderr


def test_config_set_takes_good_names_addresses_and_flags_after_a_negative_value(isolated_env: Path) -> None:
    for key, value in [
        ("embedding.provider", "openai"),
        ("milvus.uri", "~/stores/notes.db"),
        ("milvus.uri", "http://localhost:19530"),
        ("embedding.provider", "env:MY_PROVIDER"),  # read when used
        ("llm.model", "-x"),  # a value that starts with a dash is still a value
    ]:
        assert memsearch("config", "set", key, value).returncode == 0, (key, value)
    negative = memsearch("config", "set", "chunking.overlap_lines", "-1", "--project")
    assert _one_error(negative.stderr).startswith("Error: Invalid value for 'chunking.overlap_lines'")
    assert memsearch("config", "set", "watch.debounce_ms", "5", "--project").returncode == 0
    assert load_config_file(isolated_env / ".memsearch.toml") == {"watch": {"debounce_ms": 5}}


# --- 15. a typo in a project file -----------------------------------------------------------------


def test_a_typo_in_a_project_file_is_warned_about_like_one_in_the_global_file(isolated_env: Path) -> None:
    (isolated_env / ".memsearch.toml").write_text(
        '[chunking]\nmax_chunk_sise = 800\n[milvus]\nuri = "elsewhere.db"\n', encoding="utf-8"
    )
    result = memsearch("config", "get", "chunking.max_chunk_size")
    assert result.returncode == 0 and result.stdout == "1500\n"
    assert result.stderr == (
        f"Unknown config key 'chunking.max_chunk_sise' in {isolated_env / '.memsearch.toml'} (ignored)\n"
    )  # milvus.uri is a real key the allowlist leaves out: no word about it


# --- 16. config init, section by section ----------------------------------------------------------


def test_config_init_keeps_each_section_with_one_answer() -> None:
    result = memsearch("config", "init", input="\n" * 8)
    assert result.returncode == 0, result.stderr
    sections = [line for line in result.stdout.splitlines() if line.startswith("── ")]
    assert [s.split(" ── ")[0] for s in sections] == [
        "── Milvus", "── Embedding", "── Chunking", "── Watch", "── LLM (for memsearch compact)",
        "── Plugin turn summaries", "── Advanced maintenance", "── Prompts",
    ]  # fmt: skip
    assert (
        "── Embedding ── provider onnx, model sentence-transformers/all-MiniLM-L6-v2 (its default)"
        in sections
    )
    assert result.stdout.count("Change these settings? [y/N]") == 8
    # nothing of a kept section is written: only the indexing defaults a new file gets
    assert load_config_file(global_config_path()) == {
        "indexing": {"ignore_files": [".gitignore"], "exclude": []}
    }


def test_config_init_asks_a_chosen_section_and_asks_a_bad_answer_again() -> None:
    answers = ["", "y", "onxx", "openai", "", "", "env:OPENAI_API_KEY", *[""] * 6]
    result = memsearch("config", "init", input="".join(f"{a}\n" for a in answers))
    assert result.returncode == 0, result.stderr
    assert "unknown embedding provider 'onxx'. Hint: did you mean 'onnx'?" in result.stdout  # asked again
    assert load_config_file(global_config_path()) == {
        "embedding": {"provider": "openai", "model": "", "base_url": "", "api_key": "env:OPENAI_API_KEY"},
        "indexing": {"ignore_files": [".gitignore"], "exclude": []},
    }
    shown = json.loads(memsearch("config", "get", "milvus", env={"OPENAI_API_KEY": "k"}).stdout)
    assert shown["uri"] == "~/.memsearch/milvus.db"  # the section kept as it was


def test_config_init_reads_its_answers_from_a_pipe_without_a_terminal() -> None:
    """The non-interactive path: every section opened, every question answered, from a file."""
    answers = os.linesep.join(["y", "~/m.db", "", "notes"] + [""] * 7) + os.linesep
    result = memsearch("config", "init", input=answers)
    assert result.returncode == 0, result.stderr
    assert load_config_file(global_config_path())["milvus"] == {
        "uri": "~/m.db",
        "token": "",
        "collection": "notes",
    }


# --- 9. a path that does not exist -----------------------------------------------------------------

MISSING = (
    "Error: No such file or folder: {path} (nothing was indexed). Hint: check the path; index only reads "
    "paths that exist"
)


def test_memsearch_refuses_a_missing_path_as_the_cli_does(isolated_env: Path, tmp_path: Path) -> None:
    """``MemSearch(["./memroy"]).index()`` indexed nothing without a word, where the CLI refused
    the path: now the library raises, and the CLI prints the library's error."""
    (isolated_env / "memory").mkdir()
    program = (
        "import asyncio, sys\n"
        "from memsearch import MemSearch\n"
        "from memsearch.errors import PathNotFoundError\n"
        "async def main():\n"
        "    with MemSearch(['./memroy'], milvus_uri=sys.argv[1]) as ms:\n"
        "        try:\n"
        "            await ms.index()\n"
        "        except FileNotFoundError as exc:\n"
        "            print(type(exc).__name__, exc.one_line())\n"
        "asyncio.run(main())\n"
    )
    uri = str(tmp_path / "m.db")
    ran = subprocess.run([sys.executable, "-c", program, uri], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    expected = MISSING.format(path=isolated_env / "memroy")
    assert ran.stdout.strip() == "PathNotFoundError " + expected.removeprefix("Error: ")
    cli = memsearch("index", "memory", "./memroy", "--milvus-uri", uri)
    assert cli.returncode == 2
    assert _one_error(cli.stderr) == expected


def test_a_missing_path_is_refused_by_the_stores_owner_too(tmp_path: Path) -> None:
    """With ``memsearch serve`` owning the store, the check runs there, on the absolute path."""
    from test_service import start_service

    uri = str(tmp_path / "served.db")
    service = start_service(uri)
    try:
        cli = memsearch("index", str(tmp_path / "memroy"), "--milvus-uri", uri)
        assert cli.returncode == 2
        assert _one_error(cli.stderr) == MISSING.format(path=tmp_path / "memroy")
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=60) == 0


# --- 10. a note that is only a heading -------------------------------------------------------------


@pytest.mark.model
def test_a_note_that_is_only_a_heading_is_found(isolated_env: Path) -> None:
    notes = isolated_env / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text(
        "# Renew the wildcard TLS certificate before 2026-12-20\n", encoding="utf-8"
    )
    (notes / "other.md").write_text(
        "# Deploys\n\nWe deploy on Tuesdays after the standup.\n", encoding="utf-8"
    )
    indexed = memsearch("index", str(notes))
    assert indexed.returncode == 0 and indexed.stdout == "Indexed 2 chunks.\n", indexed.stderr
    found = memsearch("search", "when does the TLS certificate expire", "--top-k", "1", "--json-output")
    hits = json.loads(found.stdout)
    assert hits[0]["source"] == str(notes / "todo.md")
    assert hits[0]["content"] == "# Renew the wildcard TLS certificate before 2026-12-20"
    expanded = memsearch("expand", hits[0]["chunk_hash"])
    assert expanded.returncode == 0 and "Renew the wildcard TLS certificate" in expanded.stdout


# --- 11. index . in a project ------------------------------------------------------------------------


@pytest.mark.model
def test_index_of_a_project_says_it_left_the_hidden_journals_out(isolated_env: Path) -> None:
    project = isolated_env / "proj"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    (project / "docs").mkdir()
    (project / "docs" / "deploy.md").write_text("# Deploys\n\nWe deploy on Tuesdays.\n", encoding="utf-8")
    (project / ".memsearch" / "memory" / "2026-11-30.md").write_text(
        "## Session 10:00\n\n### 10:00\n- Raised the Redis pool to twenty connections.\n", encoding="utf-8"
    )
    first = memsearch("index", ".", cwd=project)
    assert first.returncode == 0 and first.stdout == "Indexed 1 chunk.\n"
    assert first.stderr == (
        "Warning: skipped .memsearch/memory: the agents' journals, in a hidden folder, which indexing a "
        "folder leaves out; name it to index it too: memsearch index .memsearch/memory\n"
    )
    both = memsearch("index", ".", ".memsearch/memory", cwd=project)  # as the line says: no warning
    assert (both.returncode, both.stdout, both.stderr) == (0, "Indexed 1 chunk.\n", "")
    found = memsearch("search", "Redis pool", "--top-k", "1", "--json-output", cwd=project)
    assert json.loads(found.stdout)[0]["source"].endswith("2026-11-30.md")


# --- 14. wording: hints that work as printed, counts that agree -------------------------------------


@pytest.mark.model
def test_the_scan_hint_names_the_folder_it_scanned(isolated_env: Path) -> None:
    notes = isolated_env / "my notes"
    notes.mkdir()
    token = "ghp_" + "a1B2c3D4e5" * 4
    (notes / "2026-11-30.md").write_text(f"## Session 10:00\n\n- pushed with {token}\n", encoding="utf-8")
    found = memsearch("scan", str(notes))
    assert found.returncode == 1
    line = _one_error(found.stderr)
    assert line.endswith(
        f"Hint: run `memsearch scan --redact '{notes}'` to rewrite the journals without them"
    )
    hinted = line.split("`")[1]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # where memsearch is installed
    redacted = subprocess.run(  # it shows what it will change and asks, as a person would be asked
        ["bash", "-c", hinted],
        input="y\n",
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PATH": path},
    )
    assert redacted.returncode == 0, redacted.stderr
    assert "Will redact 1 secret in 1 journal:" in redacted.stdout
    assert token not in (notes / "2026-11-30.md").read_text(encoding="utf-8")
    assert memsearch("scan", str(notes)).returncode == 0


@pytest.mark.model
def test_watch_counts_one_chunk_as_index_does(isolated_env: Path) -> None:
    notes = isolated_env / "notes"
    notes.mkdir()
    watch = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "watch", str(notes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().startswith("Watching 1 path for changes")
        note = notes / "deploy.md"
        note.write_text("# Deploys\n\nWe deploy on Tuesdays after the standup.\n", encoding="utf-8")
        assert watch.stdout.readline() == f"Indexed 1 chunk from {note}\n"
    finally:
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=60)


def test_a_read_of_a_uri_that_names_no_store_says_what_index_says(isolated_env: Path) -> None:
    index = memsearch("index", str(isolated_env), "--milvus-uri", "notadb")
    expected = (
        f"Error: Not a Milvus Lite database path: {isolated_env / 'notadb'} (it must end in .db). Hint: Use "
        "a path like ~/.memsearch/milvus.db, or a server URI starting with http://, https://, tcp://, unix:."
    )
    assert _one_error(index.stderr) == expected
    for read in (["search", "deploys"], ["expand", "0123456789abcdef"], ["stats"]):
        result = memsearch(*read, "--milvus-uri", "notadb")
        assert result.returncode == 1 and _one_error(result.stderr) == expected, read
    assert not (isolated_env / "notadb").exists()


@pytest.mark.model
def test_the_dimension_mismatch_hint_works_as_printed_after_a_reset(
    fake_api: FakeEmbeddingServer, isolated_env: Path
) -> None:
    notes = _notes(isolated_env, 3)
    uri = ["--milvus-uri", str(isolated_env / "m.db")]
    first = memsearch("index", str(notes), *uri)  # the ONNX model: 384 dimensions
    assert first.returncode == 0 and first.stdout == "Indexed 6 chunks.\n", first.stderr
    other = ["--provider", "ollama", "--model", "m", "--base-url", fake_api.url]  # 8 dimensions
    mismatch = memsearch("index", str(notes), *uri, *other)
    line = _one_error(mismatch.stderr)
    assert "has dim=384 but the current embedding provider outputs dim=8" in line
    assert "Hint: after the reset, `memsearch index <paths>` rebuilds the index" in line
    assert "--force" not in line
    assert memsearch("reset", "--yes", *uri).returncode == 0
    rebuilt = memsearch("index", str(notes), *uri, *other)  # as the hint says: no --force
    assert rebuilt.returncode == 0 and rebuilt.stdout == "Indexed 6 chunks.\n", rebuilt.stderr


# --- 13. the README's demo ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_the_readmes_stop_command_stops_the_demos_service(isolated_env: Path) -> None:
    """``make demo`` leaves a service for its own store (the Makefile's DEMO_FLAGS); the README's
    command, run in the clone as written, must stop that one, not look for the default store's."""
    from test_service import start_service

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = re.search(r"^DEMO\s*:=\s*(\S+)$", makefile, re.MULTILINE)
    assert demo and "--milvus-uri $(DEMO)/milvus.db" in makefile
    store = isolated_env / demo.group(1) / "milvus.db"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    written = re.search(r"^\.venv/bin/memsearch (service stop .*)$", readme, re.MULTILINE)
    assert written, "the README names how to stop the demo's service"
    store.parent.mkdir()
    service = start_service(str(store))
    try:
        plain = memsearch("service", "stop", cwd=isolated_env)  # the default store: not the demo's
        assert plain.returncode == 0
        assert plain.stdout == (
            f"No memory service is running for {Path.home() / '.memsearch' / 'milvus.db'}. One runs for "
            f"{store}: `memsearch service stop --milvus-uri {store}` stops it.\n"
        )
        stopped = memsearch(*written.group(1).split(), cwd=isolated_env)
        assert stopped.returncode == 0 and stopped.stdout.startswith(
            f"Stopped the memory service for {store}"
        )
        assert service.wait(timeout=60) == 0
    finally:
        if service.poll() is None:
            service.kill()
