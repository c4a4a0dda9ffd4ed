"""Values and names from outside memsearch, with real processes: numbers, yes/no variables, file names.

What memsearch did not write is checked where it comes in: every number from a config file, a flag,
``config set`` or a ``MEMSEARCH_*`` variable is finite and inside its declared range, every yes/no is
one of the accepted words; anything else is one ``Error:`` line naming the key and what is allowed,
never a traceback or a dead thread. A file name the index cannot hold skips that file only, and an
embedding server failing mid-run fails the run without losing what was stored.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, fake_api  # noqa: F401
from memsearch.config import resolve_config
from memsearch.errors import ConfigValueError
from memsearch.service.paths import read_info, service_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


def one_error_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The command failed with exactly one ``Error:`` line on stderr, holding every needle."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def use_fake_api(api: FakeEmbeddingServer, uri: str) -> None:
    """The global config: the fake OpenAI-compatible server (a model of our own: no known dimension)."""
    folder = Path(os.environ["HOME"]) / ".memsearch"
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(
        f'[embedding]\nprovider = "openai"\nmodel = "fake-embed"\nbase_url = "{api.url}/v1"\n'
        f'api_key = "k"\n[milvus]\nuri = "{uri}"\n'
    )


# --- numbers from files, flags and config set ---------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "shown"),
    [
        ("[embedding]\ntimeout = nan\n", "embedding.timeout", "must be a finite number (got nan)"),
        ("[milvus]\nlock_timeout = inf\n", "milvus.lock_timeout", "must be a finite number (got inf)"),
        ("[milvus]\nlock_timeout = 1e400\n", "milvus.lock_timeout", "must be a finite number (got inf)"),
        ("[service]\nidle_timeout = 1e300\n", "service.idle_timeout", "must be <= 31536000"),
        ("[chunking]\nmax_chunk_size = 9999999999\n", "chunking.max_chunk_size", "must be <= 1000000"),
    ],
)
def test_numbers_in_the_global_file_are_finite_and_in_range(toml: str, key: str, shown: str) -> None:
    folder = Path(os.environ["HOME"]) / ".memsearch"
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(toml)
    with pytest.raises(ConfigValueError, match=rf"'{key}' in .*config\.toml: {re.escape(shown)}") as info:
        resolve_config()
    assert "Use a value from" in str(info.value.hint) or "finite" in str(info.value.hint)


def test_config_set_and_flags_refuse_what_the_file_refuses() -> None:
    proc = memsearch("config", "set", "embedding.timeout", "inf")
    one_error_line(proc, "'embedding.timeout'", "must be a finite number (got inf)")
    assert not (Path(os.environ["HOME"]) / ".memsearch" / "config.toml").exists()  # nothing written
    proc = memsearch("config", "set", "service.idle_timeout", "nan")
    one_error_line(proc, "'service.idle_timeout'", "finite")
    proc = memsearch("index", ".", "--batch-size", "1000000000", "--provider", "onnx")
    one_error_line(proc, "'embedding.batch_size' in overrides", "must be <= 100000", "from 0 to 100000")


def test_a_project_debounce_that_would_kill_the_watch_is_refused_before_it_starts(
    isolated_env: Path,
) -> None:
    """``watch.debounce_ms = 10**13`` (a project file may set it) used to reach the watch's worker
    thread, whose wait overflowed: the thread died and the watch indexed nothing, silently."""
    (isolated_env / ".memsearch.toml").write_text("[watch]\ndebounce_ms = 10000000000000\n")
    notes = isolated_env / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nalpha\n")
    watch = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "watch", str(notes), "--milvus-uri", str(isolated_env / "w.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=isolated_env,
    )
    try:
        out, err = watch.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=30)
        pytest.fail(f"the watch started with debounce_ms = 10**13: {out!r} {err!r}")
    proc = subprocess.CompletedProcess(watch.args, watch.returncode, out, err)
    one_error_line(proc, "'watch.debounce_ms'", ".memsearch.toml", "must be <= 3600000")


# --- MEMSEARCH_* variables ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "shown"),
    [
        ("MEMSEARCH_SERVICE_TIMEOUT", "inf", "must be a finite number (got inf)"),
        ("MEMSEARCH_SERVICE_TIMEOUT", "1e400", "must be a finite number"),
        ("MEMSEARCH_SERVICE_TIMEOUT", "nan", "must be a finite number (got nan)"),
        ("MEMSEARCH_SERVICE_TIMEOUT", "soon", "expected a number (got 'soon')"),
        ("MEMSEARCH_NO_SERVICE", "maybe", "'maybe' is not a yes/no value"),
        # found here: these were silently ignored (the setting or the default applied instead)
        ("MEMSEARCH_SERVICE_AUTOSTART", "perhaps", "'perhaps' is not a yes/no value"),
        ("MEMSEARCH_SERVICE_MAX_ON_DEMAND", "0", "must be >= 1 (got 0)"),
        ("MEMSEARCH_SERVICE_IDLE_TIMEOUT", "-5", "must be >= 1 (got -5.0)"),
        ("MEMSEARCH_DISABLE", "yes please", "is not a yes/no value"),
    ],
)
def test_a_bad_variable_is_one_error_line_naming_it(variable: str, value: str, shown: str) -> None:
    proc = memsearch("stats", "--milvus-uri", str(Path.cwd() / "none.db"), env={variable: value})
    line = one_error_line(proc, f"'{variable}'", shown)
    assert "true/false, yes/no, on/off or 1/0" in line or "Use a value from" in line


@pytest.mark.model
def test_no_service_false_means_false_and_an_infinite_timeout_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MEMSEARCH_NO_SERVICE=false`` was read as on (only "" and "0" meant off), and
    ``MEMSEARCH_SERVICE_TIMEOUT=inf`` reached the socket deadline of a client: OverflowError."""
    memory = tmp_path / "memory"
    shutil.copytree(EXAMPLES, memory)
    uri = str(tmp_path / "values.db")
    assert memsearch("index", str(memory), "--milvus-uri", uri).returncode == 0
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    monkeypatch.setenv("MEMSEARCH_SERVICE_IDLE_TIMEOUT", "30")
    try:
        proc = memsearch(
            "search", "database timeout", "-j", "--milvus-uri", uri, env={"MEMSEARCH_NO_SERVICE": "False"}
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)
        pid = read_info(service_paths(uri)).get("pid")
        assert isinstance(pid, int), "MEMSEARCH_NO_SERVICE=False kept the search off the service"

        proc = memsearch(
            "search", "database timeout", "--milvus-uri", uri, env={"MEMSEARCH_SERVICE_TIMEOUT": "inf"}
        )
        one_error_line(proc, "'MEMSEARCH_SERVICE_TIMEOUT'", "finite", "0.01 to 86400")
    finally:
        memsearch("service", "stop", "--milvus-uri", uri, timeout=60)


# --- names and places ---------------------------------------------------------------------------


def test_a_file_name_with_control_characters_never_stops_its_neighbours(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    names = ["before.md", "bell\x07.md", "esc\x1b[31m.md", "new\nline.md", "tab\there.md", "zafter.md"]
    for i, name in enumerate(names):
        (notes / name).write_text(f"# Note {i}\n\nword{i} body\n")
    uri = str(tmp_path / "names.db")
    use_fake_api(fake_api, uri)
    proc = memsearch("index", str(notes))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Indexed 4 chunks.\n"
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("Warning: skipped")]
    assert len(skipped) == 2 and "U+0007" in skipped[0] and "U+001B" in skipped[1], proc.stderr
    assert "rename the file" in skipped[0]
    proc = memsearch("search", "word5 body", "-j", "-k", "10")
    sources = {Path(hit["source"]).name for hit in json.loads(proc.stdout)}
    assert sources == {"before.md", "new\nline.md", "tab\there.md", "zafter.md"}
    # The next run changes nothing and warns again (the files are still there, still skipped).
    proc = memsearch("index", str(notes))
    assert (proc.returncode, proc.stdout) == (0, "Indexed 0 chunks.\n"), proc.stderr


@pytest.mark.fresh_caches
def test_a_memsearch_home_that_cannot_be_created_is_one_error_line(tmp_path: Path) -> None:
    """``~/.memsearch`` is a file: the run folder of the memory service cannot be made there."""
    (Path(os.environ["HOME"]) / ".memsearch").write_text("not a folder")
    notes = tmp_path / "notes"
    notes.mkdir()
    proc = memsearch("watch", str(notes), timeout=60)
    one_error_line(proc, ".memsearch", "not a directory")
    proc = memsearch("index", str(notes))
    one_error_line(proc, ".memsearch")


# --- an embedding server failing mid-run --------------------------------------------------------


def test_an_embedding_server_failing_mid_index_fails_the_run_and_keeps_what_was_stored(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """The first step (64 chunks) is embedded, then every request answers HTTP 500: one Error line
    and exit 1, no "Indexed" claim, the embedded step stored, and the next run embeds only the
    rest. (The embedding runs before the store opens, issue 28: the step already embedded is
    stored from the embedding cache before the failure is reported.)"""
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(70):
        (notes / f"n{i:02d}.md").write_text(f"# Note {i}\n\nbody number {i}\n")
    uri = str(tmp_path / "mid.db")
    use_fake_api(fake_api, uri)
    # one answer, the first step (its vectors give the model's dimension: no probe), then failures
    fake_api.fail(500, '{"error": "overloaded"}', after=1)
    proc = memsearch("index", str(notes), "--batch-size", "64")
    one_error_line(proc, "HTTP 500")
    assert "Indexed" not in proc.stdout  # no claim of chunks
    stats = memsearch("stats")
    assert stats.stdout == "Total indexed chunks: 64\n", stats.stderr  # the first step is kept

    fake_api.clear()
    posts = len(fake_api.requests)
    proc = memsearch("index", str(notes), "--batch-size", "64")
    assert (proc.returncode, proc.stdout) == (0, "Indexed 6 chunks.\n"), proc.stderr
    assert len(fake_api.requests) == posts + 1  # only the rest is embedded
    assert memsearch("stats").stdout == "Total indexed chunks: 70\n"
