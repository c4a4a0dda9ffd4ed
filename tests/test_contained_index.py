"""A cloned repository's memory folder is indexed *contained*, and memsearch's own files in its
``.memsearch/`` are read without blocking or following a link: real hooks, the real CLI, a real
``memsearch serve`` over Milvus Lite with the real embedding model.

What a repository can ship: ``.memsearch/memory/notes.md`` as a link to the user's credentials
(indexed, it would reach the agent through auto-injected hits and ``expand``), a FIFO named like a
journal, and FIFOs or links under the names of memsearch's state, pid, lock and log files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import HookEnv, Store, hook_json, load_stdin, wait_for

from memsearch.agent.hooks.events import SYNC_ENV as SYNC
from test_hooks import claude_stop_stdin, claude_transcript

SECRET = "the vault word is zebravaultword"
QUERY = "aws secret access key zebravaultword"

#: A session start as Claude Code sends it (with no session id a hand run starts no watch at all).
SESSION = json.dumps({"session_id": "trust-test-session"})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with hookkit.serving_store(tmp_path_factory.mktemp("linkstore")) as served:
        yield served


@pytest.fixture
def hk(tmp_path: Path, store: Store) -> Iterator[HookEnv]:
    with hookkit.hook_env(tmp_path / "t", store, extra_env={SYNC: "1"}) as world:
        yield world


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[HookEnv]:
    """A project with no store: for hooks that must return before they would touch one."""
    with hookkit.hook_env(tmp_path / "t", None) as world:
        yield world


def plant(hk: HookEnv) -> Path:
    """The credentials outside the project, a link to them and a FIFO in the memory folder."""
    secret = hk.root / "dot-aws" / "credentials.md"
    secret.parent.mkdir(parents=True)
    secret.write_text(f"# credentials\n\n{SECRET}\n")
    hk.memory_dir.mkdir(parents=True, exist_ok=True)
    (hk.memory_dir / "aws-notes.md").symlink_to(secret)
    os.mkfifo(hk.memory_dir / "x.md")  # opened for reading, it would block forever
    return secret


def search(hk: HookEnv, query: str, collection: str) -> str:
    proc = hk.memsearch("search", query, "-j", "-k", "20", "--collection", collection)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def indexed(hk: HookEnv, text: str, query: str, collection: str) -> bool:
    """Whether a search finds ``text`` yet (a watch may not have created the collection yet)."""
    proc = hk.memsearch("search", query, "-j", "-k", "20", "--collection", collection)
    return proc.returncode == 0 and text in proc.stdout


# --- the hooks' own indexing ------------------------------------------------------------------


def test_the_stop_hooks_index_leaves_out_a_link_and_never_opens_a_fifo(hk: HookEnv) -> None:
    plant(hk)
    proc = hk.hook("claude-code", "stop", claude_stop_stdin(hk, claude_transcript(hk)), timeout=90)
    hook_json(proc)
    collection = hk.collection()
    assert "Switch totals.py" in search(hk, "Decimal totals changed code tests", collection)  # indexed
    assert "zebravaultword" not in search(hk, QUERY, collection)
    assert f"not indexed: {hk.memory_dir / 'aws-notes.md'}: a symbolic link" in proc.stderr
    assert f"not indexed: {hk.memory_dir / 'x.md'}: not a regular file" in proc.stderr


def test_the_session_watch_indexes_no_link_at_start_or_later(hk: HookEnv) -> None:
    """Codex keeps a watch for the session: ``memsearch watch <memory> --no-follow-links``."""
    hk.copy_memory()
    secret = plant(hk)
    stdin = load_stdin("codex-session-start.json", TRANSCRIPT="", CWD=str(hk.project))
    hook_json(hk.hook("codex", "session-start", stdin, timeout=90))
    collection = hk.collection("codex")
    wait_for(lambda: indexed(hk, "weasyprint", "PDF renderer version pinned", collection), 60, 1.0)
    # While it runs: a new link, and a new note (indexed, so the link's event was seen before it).
    (hk.memory_dir / "late.md").symlink_to(secret)
    (hk.memory_dir / "later.md").write_text("# Later\n\nThe gateway timeout is now 45 seconds.\n")
    wait_for(lambda: indexed(hk, "45 seconds", "gateway timeout seconds", collection), 60, 1.0)
    assert "zebravaultword" not in search(hk, QUERY, collection)
    assert "a symbolic link" in (hk.memsearch_dir / ".watch.log").read_text()


# --- the CLI flag -----------------------------------------------------------------------------


def test_index_no_follow_links_reports_the_link_and_the_default_still_follows_it(hk: HookEnv) -> None:
    plant(hk)
    (hk.memory_dir / "deploy.md").write_text("# Deploy\n\nReleases go out with `make release`.\n")
    os.unlink(hk.memory_dir / "x.md")
    proc = hk.memsearch("index", str(hk.memory_dir), "--no-follow-links", "--collection", "ms_links_cli")
    assert proc.returncode == 1
    link = hk.memory_dir / "aws-notes.md"
    assert f"Failed: {link}: a symbolic link (links are not followed in this index)" in proc.stderr
    assert "Error: 1 file could not be indexed" in proc.stderr
    assert "make release" in search(hk, "how do releases go out", "ms_links_cli")
    assert "zebravaultword" not in search(hk, QUERY, "ms_links_cli")
    # A user's own `memsearch index` follows links, as the original does.
    proc = hk.memsearch("index", str(hk.memory_dir), "--collection", "ms_links_cli")
    assert proc.returncode == 0, proc.stderr
    assert "zebravaultword" in search(hk, QUERY, "ms_links_cli")


def test_watch_no_follow_links_skips_links_found_at_start_and_later(hk: HookEnv) -> None:
    secret = plant(hk)
    os.unlink(hk.memory_dir / "x.md")
    (hk.memory_dir / "inside.md").write_text("# Inside\n\nThe cache is warmed at nine.\n")
    argv = [sys.executable, "-m", "memsearch", "watch", str(hk.memory_dir), "--no-follow-links"]
    watch = subprocess.Popen(
        [*argv, "--collection", "ms_links_watch", "--debounce-ms", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=hk.project,
        env=hk.env(),
    )
    try:
        assert watch.stdout is not None
        for line in watch.stdout:
            if line.startswith("Watching"):
                break
        (hk.memory_dir / "inner-link.md").symlink_to(hk.memory_dir / "inside.md")  # a link, even inside
        (hk.memory_dir / "late.md").symlink_to(secret)
        (hk.memory_dir / "later.md").write_text("# Later\n\nThe queue drains every 7 minutes.\n")
        wait_for(lambda: indexed(hk, "7 minutes", "queue drains minutes", "ms_links_watch"), 60, 0.5)
        hits = json.loads(search(hk, QUERY + " cache warmed", "ms_links_watch"))
        assert {Path(h["source"]).name for h in hits} <= {"inside.md", "later.md"}
    finally:
        watch.terminate()
        _, err = watch.communicate(timeout=30)
    assert f"Failed: {hk.memory_dir / 'aws-notes.md'}: a symbolic link" in err
    inner = hk.memory_dir / "inner-link.md"
    assert f"Failed: {inner}: {inner} is a symbolic link" in err  # the watcher's own single-file index


# --- memsearch's own files in the project's .memsearch/ ---------------------------------------


@pytest.mark.parametrize("name", [".index-state.json", ".maintenance-state.json"])
def test_a_fifo_state_file_does_not_hang_session_start(bare: HookEnv, name: str) -> None:
    bare.memsearch_dir.mkdir(parents=True)
    os.mkfifo(bare.memsearch_dir / name)
    proc = bare.hook("claude-code", "session-start", "{}", MEMSEARCH_NO_WATCH="1", timeout=30)
    hook_json(proc)
    assert f"memsearch: warning: skipped {bare.memsearch_dir / name}: not a regular file" in proc.stderr


@pytest.mark.parametrize(
    "names",
    [(".processes.lock",), (".watch.pid", ".watch.sessions", ".watch.log")],
    ids=["lock", "pid-sessions-log"],
)
def test_fifo_process_files_do_not_hang_session_start(bare: HookEnv, names: tuple[str, ...]) -> None:
    bare.memsearch_dir.mkdir(parents=True)
    fifos = [bare.memsearch_dir / name for name in names]
    for fifo in fifos:
        os.mkfifo(fifo)
    try:
        out = hook_json(bare.hook("claude-code", "session-start", SESSION, timeout=30))
    finally:  # the fixture's clean-up reads the pid file: not through a FIFO (an older memsearch blocks)
        for fifo in fifos:
            if fifo.is_fifo():
                fifo.unlink()
    assert "WARNING: background indexing did not start" in out["systemMessage"]


def test_a_linked_watch_log_is_not_written_through(bare: HookEnv) -> None:
    victim = bare.root / "dot-bashrc"
    victim.write_text("export PATH=$HOME/bin:$PATH\n")
    bare.memsearch_dir.mkdir(parents=True)
    (bare.memsearch_dir / ".watch.log").symlink_to(victim)
    out = hook_json(bare.hook("claude-code", "session-start", SESSION, timeout=30))
    assert "WARNING: background indexing did not start" in out["systemMessage"]
    assert victim.read_text() == "export PATH=$HOME/bin:$PATH\n"


def test_a_memory_folder_linked_out_of_the_project_gets_no_watch(hk: HookEnv) -> None:
    outside = hk.root / "private-notes"
    outside.mkdir()
    (outside / "2026-06-12.md").write_text(f"## Session 10:00\n\n### 10:00\n- {SECRET}\n")
    hk.memsearch_dir.mkdir(parents=True)
    hk.memory_dir.symlink_to(outside)
    stdin = load_stdin("codex-session-start.json", TRANSCRIPT="", CWD=str(hk.project))
    proc = hk.hook("codex", "session-start", stdin, timeout=60)
    hook_json(proc)
    assert not (hk.memsearch_dir / ".watch.pid").exists()  # no watch, so nothing there is indexed
    assert (
        f"skipped {hk.memory_dir}: outside {hk.project} (a folder on the way is a symbolic link); not indexed"
        in (proc.stderr)
    )
