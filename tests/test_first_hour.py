"""A new user's first hour, each trap as the exact command and the one line it must answer.

Issue 22: a fresh clone, the README and the docs, every command copied as written. Real parts:
real ``memsearch`` processes (tests/cli_process.py), a real terminal (``pty``) where one is
asked for, Milvus Lite, the original memsearch 0.4.23 from its cached side venv for "another
memsearch on PATH"; the hash embedder (tests/hash_embedder.py) only in-process, where the model
does not matter.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_process import memsearch
from memsearch.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "memory"
PLUGINS = ROOT / "plugins"
SYSTEM_PATH = "/usr/bin:/bin"
FIX = "uv tool install --force <your memsearch checkout>"


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def store(tmp_path: Path) -> list[str]:
    """The example memory indexed with the hash embedder into a store in tmp_path."""
    flags = ["--milvus-uri", str(tmp_path / "first.db"), "--provider", "hash"]
    assert invoke("index", str(EXAMPLES), *flags).exit_code == 0
    return flags


# --- the plugins with another package's memsearch on PATH ---------------------------------------


@pytest.fixture(scope="module")
def foreign_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``memsearch`` is PyPI's memsearch 0.4.23 (no ``memsearch hook``)."""
    from original_memsearch import original_cli

    folder = tmp_path_factory.mktemp("foreign")
    (folder / "memsearch").symlink_to(original_cli())
    return folder


@pytest.mark.parametrize(
    ("platform", "then"),
    [("claude-code", "then restart Claude Code"), ("codex", "then plugins/codex/install.sh")],
)
def test_a_shim_names_a_memsearch_without_hook_once_and_never_blocks(
    foreign_bin: Path, tmp_path: Path, platform: str, then: str
) -> None:
    env = {"HOME": str(tmp_path), "PATH": f"{foreign_bin}:{SYSTEM_PATH}"}
    shim = PLUGINS / platform / "hooks" / "run.sh"

    def hook(event: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(shim), event], input="{}", capture_output=True, text=True, env=env, cwd=tmp_path
        )

    start = hook("session-start")
    assert start.returncode == 0, start.stderr
    line = (
        f"[memsearch] {foreign_bin / 'memsearch'} is not this plugin's memsearch (no `memsearch hook`): "
        f"run `{FIX}`, {then}"
    )
    assert json.loads(start.stdout) == {"systemMessage": line}
    for event in ("stop", "prompt-submit"):  # exit 2 would block the host: silent and 0 instead
        later = hook(event)
        assert (later.returncode, json.loads(later.stdout)) == (0, {}), later.stderr


def test_the_plugin_docs_install_this_package_not_pypis() -> None:
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        assert not re.search(r"(uv tool|pipx|pip) install (-U )?memsearch\b", text), doc
        assert "zilliztech/memsearch" not in text, doc  # the original's repository


# --- search output ---------------------------------------------------------------------------------


def test_every_search_hit_shows_its_chunk_hash_for_expand(store: list[str]) -> None:
    hits = json.loads(invoke("search", "deploy", "--top-k", "3", "--json-output", *store).stdout)
    plain = invoke("search", "deploy", "--top-k", "3", *store).stdout
    chunk_lines = [line for line in plain.splitlines() if line.startswith("Chunk: ")]
    assert chunk_lines == [f"Chunk: {h['chunk_hash']}" for h in hits]
    assert any(len(h["content"]) <= 500 for h in hits)  # short hits too, not only cut ones
    for hit in hits:
        assert invoke("expand", hit["chunk_hash"], *store).exit_code == 0


def test_no_doc_names_a_chunk_hash_a_reader_cannot_have() -> None:
    """A chunk hash includes its file's path: one copied from a doc is "Chunk not found" on every
    other machine (the README's ``expand 57f026237c0da79b`` was); tests/test_docs_commands.py
    runs the README's expand, which takes its hash from a search."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        assert not re.search(r"memsearch expand [0-9a-f]{16}\b", doc.read_text(encoding="utf-8")), doc


def test_a_file_name_with_a_newline_forges_no_result_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    forged = "a\n--- Result 9 (score: 1.0000) ---\nSource: forged.md"
    (notes / f"{forged}.md").write_text("# Forged\n\nthe zebra crossing notes\n")
    flags = ["--milvus-uri", str(tmp_path / "m.db"), "--provider", "hash"]
    assert invoke("index", str(notes), *flags).stdout == "Indexed 1 chunk.\n"
    out = invoke("search", "zebra crossing", "--top-k", "1", *flags).stdout
    shown = f"{notes}/a\\n--- Result 9 (score: 1.0000) ---\\nSource: forged.md.md"
    assert out.splitlines()[2] == f"Source: {shown}"
    assert [line for line in out.splitlines() if line.startswith(("--- Result", "Source: "))] == [
        out.splitlines()[1],
        f"Source: {shown}",
    ]


def test_the_index_report_shows_a_bad_file_name_escaped(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "good.md").write_text("# Good\n\nfine\n")
    (notes / "bad\nFailed: nothing.md").write_bytes(b"# Bad\n\x00\x01\x02 binary\n")
    result = invoke("index", str(notes), "--milvus-uri", str(tmp_path / "m.db"), "--provider", "hash")
    assert result.exit_code == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("Failed: ")]
    assert len(failed) == 1 and failed[0].startswith(f"Failed: {notes}/bad\\nFailed: nothing.md: ")
    assert result.stderr.splitlines()[-1] == (
        "Error: 1 file could not be indexed. Hint: fix or exclude the files listed above; "
        "the other files were indexed"
    )


# --- flags the docs name -------------------------------------------------------------------------


def test_every_flag_in_the_configuration_docs_is_accepted_by_a_command() -> None:
    from memsearch.cli import COMMANDS
    from memsearch.cli.flags import FLAG_KEYS

    table = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").split("## Flags and the keys")[1]
    documented = set(re.findall(r"^\| `(--[a-z-]+)[^`]*` \| `[a-z_.]+` \|$", table, re.M))
    assert documented == {"--" + name.replace("_", "-") for name in FLAG_KEYS}
    group = cli
    accepted: set[str] = set()
    for name in COMMANDS:
        command = group.get_command(None, name)  # type: ignore[attr-defined,arg-type]
        for sub in [command, *getattr(command, "commands", {}).values()]:
            for param in sub.params:
                accepted.update(getattr(param, "opts", []))
    assert documented <= accepted, documented - accepted


# --- usage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_a_usage_error(tmp_path: Path, query: str) -> None:
    proc = memsearch("search", query, "--milvus-uri", str(tmp_path / "m.db"))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        'Error: The search query is empty. Hint: give words to search for, e.g. memsearch search "timeout"\n'
    )


def _at_a_terminal(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run ``python -m memsearch ARGS`` on a real pseudo-terminal, type ``answer``, return
    (exit code, everything it printed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        os.execv(sys.executable, [sys.executable, "-m", "memsearch", *args])
    out = b""
    deadline = time.monotonic() + 60
    while b"Continue?" not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            out += os.read(fd, 4096)
    os.write(fd, answer)
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1)[0]:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child is gone (EIO on Linux)
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("answer", [b"n\n", b"\n"])
def test_declining_reset_at_a_terminal_says_it_was_declined(
    store: list[str], tmp_path: Path, answer: bytes
) -> None:
    uri = store[1]
    code, out = _at_a_terminal(["reset", "--milvus-uri", uri], answer)
    assert code == 1, out
    assert out.splitlines()[-1] == (
        f"Error: reset declined: nothing was dropped. Hint: run `memsearch reset --yes --milvus-uri {uri}` "
        "to drop the collection"
    )
    assert invoke("stats", "--milvus-uri", uri).stdout == "Total indexed chunks: 9\n"


# --- maintenance without the host CLI ------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "task"),
    [(["maintenance", "run", "--task", "project_review", "--force"], "project_review"),
     (["skills", "distill", "--force"], "memory_to_skill")],
)  # fmt: skip
def test_a_task_run_by_hand_without_claude_says_why_in_its_own_words(
    tmp_path: Path, command: list[str], task: str
) -> None:
    project = tmp_path / "work"
    (project / ".memsearch" / "memory").mkdir(parents=True)
    (project / ".memsearch" / "memory" / "2026-01-05.md").write_text(
        "## Session 10:00\n\n### 10:00\n- exported the orders again\n"
    )
    python_dir = str(Path(sys.executable).parent)
    proc = memsearch(*command, env={"PATH": f"{python_dir}:{SYSTEM_PATH}"}, cwd=project)
    assert proc.returncode == 1
    assert proc.stdout == (
        f"{task}: error: The Claude Code CLI gave no usable answer (claude is not on PATH). Hint: Make "
        f"that CLI work in a terminal, or set plugins.claude-code.{task}.provider to an "
        "[llm.providers.<name>] entry; the task is retried on a later run.\n"
    )
    assert "memsearch hook" not in proc.stderr and ".maintenance.log" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("Error: 1 maintenance task failed: ")


# --- the troubleshooting command, run by hand ---------------------------------------------------


def test_a_hand_run_session_start_starts_no_watch(tmp_path: Path) -> None:
    project = tmp_path / "work"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{SYSTEM_PATH}"}
    proc = subprocess.run(
        ["bash", str(PLUGINS / "claude-code" / "hooks" / "run.sh"), "session-start"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    message = json.loads(proc.stdout)["systemMessage"]
    assert message.endswith(
        " | (no session id in the hook input, as when run by hand: no background watch started)"
    )
    assert not (project / ".memsearch" / ".watch.pid").exists()
    time.sleep(1)
    watches = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(project / ".memsearch" / "memory") not in watches


# --- counts -------------------------------------------------------------------------------------


def test_count_after_reset_is_zero(tmp_path: Path) -> None:
    from memsearch import MemSearch

    with MemSearch([str(EXAMPLES)], embedding_provider="hash", milvus_uri=str(tmp_path / "m.db")) as ms:
        asyncio.run(ms.index())
        assert ms.count() == 9
        ms.reset()
        assert ms.count() == 0
    stats = invoke("stats", "--milvus-uri", str(tmp_path / "m.db"))  # the CLI still says it is gone
    assert stats.exit_code == 1 and stats.stderr.startswith("Error: No collection 'memsearch_chunks'")


def test_counts_agree_with_their_noun(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "one.md").write_text("# One\n\njust one chunk\n")
    flags = ["--milvus-uri", str(tmp_path / "m.db"), "--provider", "hash"]
    assert invoke("index", str(notes), *flags).stdout == "Indexed 1 chunk.\n"
    (notes / "two.md").write_text("# Two\n\nsecond\n\n# Three\n\nthird\n")
    assert invoke("index", str(notes), *flags).stdout == "Indexed 2 chunks.\n"


def test_config_list_leaves_out_the_unused_deprecated_compact_section(tmp_path: Path) -> None:
    assert "[compact]" not in invoke("config", "list").stdout.splitlines()
    invoke("config", "set", "compact.llm_model", "gpt-old")
    assert "[compact]" in invoke("config", "list").stdout.splitlines()  # set in a file: shown


# --- the server extra -----------------------------------------------------------------------------


#: ``memsearch ARGS`` in a Python that cannot import ``{hidden}`` (as when they are not installed).
WITHOUT = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {hidden}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Hide())
from memsearch.cli import main
sys.argv[0] = "memsearch"
main()
"""


def test_a_server_uri_without_pymilvus_is_one_error_line() -> None:
    hide = WITHOUT.format(hidden={"pymilvus"})
    proc = subprocess.run(
        [sys.executable, "-c", hide, "stats", "--milvus-uri", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        "Error: A Milvus server (http://127.0.0.1:9) needs pymilvus, which is not installed. Hint: install "
        'it: pip install "pymilvus>=2.6" (or this package with its [server] extra)\n'
    )


def test_nothing_on_the_default_path_needs_pymilvus_or_pandas(tmp_path: Path) -> None:
    hide = WITHOUT.format(hidden={"pymilvus", "pandas"})
    uri = str(tmp_path / "m.db")
    for args in (["index", str(EXAMPLES)], ["search", "database connection timeout", "--top-k", "1"]):
        proc = subprocess.run(
            [sys.executable, "-c", hide, *args, "--milvus-uri", uri],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
    assert "Chunk: " in proc.stdout
