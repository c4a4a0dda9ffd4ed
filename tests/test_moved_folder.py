"""A notes folder moved or deleted after it was indexed: its chunks must not outlive it.

Real processes on one store: ``memsearch serve`` owning it, a ``memsearch watch`` joined to it,
CLI ``index``/``search``/``expand``/``forget``; the embeddings come from a fake API on 127.0.0.1,
which holds a run's texts so that two runs overlap for sure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, fake_api  # noqa: F401  (fixture)
from memsearch.service.client import ServiceClient
from memsearch.service.paths import service_paths


def _config(fake_api: FakeEmbeddingServer, uri: Path) -> None:  # noqa: F811
    config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
    config.write_text(
        f'[embedding]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake_api.url}/v1"\n'
        f'[milvus]\nuri = "{uri}"\n[watch]\ndebounce_ms = 100\n',
        encoding="utf-8",
    )


def _notes(folder: Path, word: str, count: int) -> None:
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"{word}-{n}.md").write_text(
            f"# {word.title()} {n}\n\nThe {word} number {n} nests by the weir.\n", encoding="utf-8"
        )


def _total(uri: Path) -> int:
    stats = memsearch("stats", "--milvus-uri", str(uri))
    assert stats.returncode == 0, stats.stderr
    found = re.search(r"Total indexed chunks: (\d+)", stats.stdout)
    assert found, stats.stdout
    return int(found[1])


def _wait_for(what: str, log: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while what not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def test_overlapping_runs_keep_the_manifest_so_a_moved_folder_is_pruned(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """The issue's store, used by several processes at once: a ``watch`` update saved the manifest
    while a CLI ``index`` of another folder was embedding, and that run then left the manifest as
    it was, so its files were never recorded. After ``mv herons herons-old``, ``index`` of the
    parent pruned nothing (only ``--force`` did: it asks the store). Now a run merges its changes
    into the manifest another run saved meanwhile."""
    uri = tmp_path / "store.db"
    _config(fake_api, uri)
    parent = tmp_path / "parent"
    _notes(parent / "herons", "heron", 6)
    _notes(parent / "watched", "wren", 1)
    procs: list[subprocess.Popen[str]] = []
    try:
        serve_log, watch_log = tmp_path / "serve.log", tmp_path / "watch.log"
        with serve_log.open("w") as out:
            procs.append(
                subprocess.Popen([sys.executable, "-m", "memsearch", "serve"], stdout=out, stderr=out)
            )
        client = ServiceClient(service_paths(str(uri)))
        deadline = time.monotonic() + 60
        while True:
            assert procs[0].poll() is None and time.monotonic() < deadline, serve_log.read_text()
            try:
                if client.ping().get("ready"):
                    break
            except Exception:
                pass
            time.sleep(0.1)
        with watch_log.open("w") as out:
            watch = subprocess.Popen(
                [sys.executable, "-m", "memsearch", "watch", str(parent / "watched")], stdout=out, stderr=out
            )
        procs.append(watch)
        _wait_for("Watching 1 path", watch_log, watch)

        release = fake_api.hold("heron")  # the index of herons/ waits, mid-run, at the service
        index = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "index", str(parent / "herons")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(index)
        while fake_api.held == 0:
            assert index.poll() is None and time.monotonic() < deadline, index.communicate()
            time.sleep(0.05)
        (parent / "watched" / "wren-new.md").write_text("# Wren\n\nA new wren sings.\n", encoding="utf-8")
        _wait_for("wren-new.md", watch_log, watch)  # the watch's update saved the manifest meanwhile
        release.set()
        out, err = index.communicate(timeout=120)
        assert index.returncode == 0 and out == "Indexed 6 chunks.\n", err
        assert _total(uri) == 8

        (parent / "herons").rename(parent / "herons-old")
        moved = memsearch("index", str(parent / "herons-old"), str(parent / "watched"))
        assert moved.returncode == 0, moved.stderr
        pruned = memsearch("index", str(parent))  # no --force: the manifest knows herons/ now
        assert pruned.returncode == 0, pruned.stderr
        assert _total(uri) == 8  # herons-old's six, the two wrens; herons/ pruned
        found = memsearch("search", "heron nests by the weir", "-k", "10", "-j")
        assert found.returncode == 0, found.stderr
        assert {Path(h["source"]).parent.name for h in json.loads(found.stdout)} <= {"herons-old", "watched"}
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)


def test_a_gone_folder_is_named_by_every_hint_and_index_of_it_drops_its_chunks(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """``mv notes notes-old`` (or ``rm -rf notes``): search still listed ``notes/...``, ``expand``
    and ``forget`` said to run ``memsearch index``, and ``index notes`` failed (no such path). Now
    search and both hints name ``memsearch index <the gone folder>``, which removes its chunks."""
    uri = tmp_path / "store.db"
    _config(fake_api, uri)
    notes = tmp_path / "notes"
    _notes(notes / "birds", "heron", 2)
    assert memsearch("index", str(notes)).returncode == 0
    hits = json.loads(memsearch("search", "heron nests", "-j").stdout)
    chunk = hits[0]["chunk_hash"]
    notes.rename(tmp_path / "notes-old")
    command = f"memsearch index {notes}"

    found = memsearch("search", "heron nests", "-j")
    assert found.returncode == 0 and len(json.loads(found.stdout)) == 2
    assert (
        f"Note: 2 hits are from files not found on this machine (moved or deleted?); `{command}`"
        in found.stderr
    )
    for args in (["expand", chunk], ["forget", chunk, "--yes"]):
        proc = memsearch(*args)
        assert proc.returncode == 1 and f"`{command}`" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr

    pruned = memsearch(*command.split()[1:])
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stderr == f"Warning: {notes} does not exist: removed the 2 files the index held there\n"
    assert _total(uri) == 0
    after = memsearch("search", "heron nests", "-j")
    assert after.returncode == 0 and json.loads(after.stdout) == [] and after.stderr == ""

    # now nothing is held there: a path that does not exist is an error, as a typo is, and refused
    # before anything is indexed (MemSearch(["./memroy"]).index() says the same)
    again = memsearch("index", str(notes), str(tmp_path / "notes-old"))
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr == (
        f"Error: No such file or folder: {notes} (nothing was indexed). Hint: check the path; index only "
        "reads paths that exist\n"
    )
    fresh = tmp_path / "fresh.db"
    typo = memsearch("index", str(tmp_path / "memroy"), "--milvus-uri", str(fresh))
    assert typo.returncode == 2 and "No such file or folder" in typo.stderr
    assert not fresh.exists()  # nothing was created for it
    shutil.rmtree(tmp_path / "notes-old")


def test_a_name_stored_with_replaced_characters_is_never_judged_gone(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """A file name that is not valid UTF-8 is stored with U+FFFD in place of its bad bytes, so the
    stored path names no file: search must not call it gone, and ``index`` of that path (copied
    from a result) must not remove the chunks of the file, which is still there."""
    uri = tmp_path / "store.db"
    _config(fake_api, uri)
    notes = tmp_path / "notes"
    notes.mkdir()
    with open(os.path.join(os.fsencode(notes), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"# Cafe\n\nThe espresso machine descaling runs weekly.\n")
    assert memsearch("index", str(notes)).returncode == 0
    found = memsearch("search", "espresso descaling", "-j")
    assert found.returncode == 0 and found.stderr == "", found.stderr
    stored = json.loads(found.stdout)[0]["source"]
    assert "\ufffd" in stored
    copied = memsearch("index", stored)
    assert copied.returncode == 1 and "no such file or folder" in copied.stderr, copied.stderr
    assert _total(uri) == 1
