"""Forget means gone from disk: ``memsearch forget --secret`` and the store's files after ``forget``.

Real ``python -m memsearch`` processes, the packaged ONNX model, Milvus Lite in ``~/.memsearch``
(the default store) and, for the main test, a memory service owning it. A value is planted where
memory keeps text: a journal in the original's format, a hand-written note, the recall log (a
search for it), a kept original (a ``scan --redact`` backup of a journal holding it) and, through
``index``, the Lite store's files. After ``forget --secret`` a byte grep of every file under the
project's ``.memsearch``, the notes folder and ``~/.memsearch`` (the store included) finds the value
nowhere, in any form (as written, or escaped in JSON); the note and the journal come back byte for
byte when the value is given again. Killed with SIGKILL at each stage and at random times, the
value is everywhere it was, or (after the next ``index``) nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_process import memsearch

pytestmark = pytest.mark.model

VALUE = 'Kv8"pQ2mZr7wXy'  # a password no detector knows; the quote is escaped in JSON files
TOKEN = "ghp_" + "Ab3Cd" * 8
JOURNAL = f"""# 2026-03-24

## Session 09:00

### 09:00
<!-- session:s1 turn:t1 transcript:/tmp/t/s1.jsonl -->
- User set the staging database password to {VALUE} for the load test
- Agent restarted the checkout service

### 09:40
<!-- session:s1 turn:t2 transcript:/tmp/t/s1.jsonl -->
- User asked about the zebrafish aquarium heater
"""
JOURNAL2 = f"""# 2026-03-25

## Session 10:00

### 10:00
<!-- session:s2 turn:u1 transcript:/tmp/t/s2.jsonl -->
- Deployed with GITHUB_TOKEN={TOKEN} and password {VALUE}
"""
NOTE = f"""# Deploy notes

## Staging

The staging database password is {VALUE} until rotation ticket OPS-Zr81Kq on Friday.
Ask the platform team before changing it ({VALUE}).

## Backups

Nightly snapshots are kept for two weeks.
""".encode()


def _forms(value: str) -> list[bytes]:
    return [
        value.encode(),
        json.dumps(value)[1:-1].encode(),
        json.dumps(value, ensure_ascii=False)[1:-1].encode(),
    ]


class World:
    def __init__(self) -> None:
        self.project = Path.cwd()
        self.memory = self.project / ".memsearch" / "memory"
        self.journal = self.memory / "2026-03-24.md"
        self.journal2 = self.memory / "2026-03-25.md"
        self.notes = self.project / "notes"
        self.note = self.notes / "deploy.md"
        self.home = Path(os.environ["HOME"]) / ".memsearch"

    def write(self) -> None:
        self.memory.mkdir(parents=True, exist_ok=True)
        self.notes.mkdir(exist_ok=True)
        self.journal.write_text(JOURNAL, encoding="utf-8")
        self.journal2.write_text(JOURNAL2, encoding="utf-8")
        self.note.write_bytes(NOTE)

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        if stdin is None:
            return memsearch(*args)
        return subprocess.run(
            [sys.executable, "-m", "memsearch", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def plant(self) -> None:
        """The value into the index (and the store's files) and the recall log."""
        self.write()
        proc = self.run("index", str(self.memory), str(self.notes))
        assert proc.returncode == 0, proc.stderr
        proc = self.run("search", VALUE, "-k", "2")
        assert proc.returncode == 0, proc.stderr

    def store_rows_holding(self, needle: str) -> int:
        """Rows of the Lite store's files (data, delta, write-ahead log), decoded, that hold
        ``needle``: what a byte grep of compressed Parquet pages could miss."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        count = 0
        for path in (self.home / "milvus.db").rglob("*"):
            if path.suffix == ".parquet":
                table = pq.read_table(path)
            elif path.suffix == ".arrow":
                with pa.ipc.open_stream(pa.OSFile(str(path))) as reader:  # a WAL: record batch stream
                    table = reader.read_all()
            else:
                continue
            for row in table.to_pylist():
                count += any(needle in str(v) for v in row.values())
        return count

    def holders(self) -> dict[str, list[Path]]:
        """Every file under the project's .memsearch, the notes folder and ~/.memsearch holding the
        value in some form, grouped: the markdown, the recall log, the store, backups, other."""
        found: dict[str, list[Path]] = {}
        for root in (self.project / ".memsearch", self.notes, self.home):
            for path in root.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    if any(f in data for f in _forms(VALUE)):
                        group = next(
                            (g for g in ("milvus.db", "recall", "backups") if g in path.parts),
                            "markdown" if path.suffix == ".md" else "other",
                        )
                        found.setdefault(group, []).append(path)
        return found

    def forget(self, *extra: str, pause: str = "") -> subprocess.Popen[str]:
        env = {**os.environ, "MEMSEARCH_TEST_FORGET_PAUSE": pause} if pause else None
        given = self.project.parent / "value.txt"  # outside every folder searched for the value
        given.write_text(VALUE + "\n")
        with given.open() as stdin:
            return subprocess.Popen(
                [sys.executable, "-m", "memsearch", "forget", "--secret", "-", "--yes", *extra],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )


@contextlib.contextmanager
def memory_service() -> Iterator[subprocess.Popen[bytes]]:
    """``memsearch serve`` on the default store, ready (it owns the store until the block ends)."""
    from memsearch.config import DEFAULT_MILVUS_URI
    from memsearch.service.client import ServiceClient
    from memsearch.service.paths import service_paths

    service = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "serve"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = ServiceClient(service_paths(os.path.expanduser(DEFAULT_MILVUS_URI)))
    deadline = time.monotonic() + 120
    try:
        while True:
            assert service.poll() is None and time.monotonic() < deadline
            with contextlib.suppress(Exception):
                info = client.ping()
                if info.get("pid") == service.pid and info.get("ready"):
                    break
            time.sleep(0.2)
        yield service
    finally:
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 0


def test_forget_secret_leaves_the_value_in_no_file_and_the_undo_needs_it_again() -> None:
    w = World()
    with memory_service() as service:
        w.plant()
        redacted = w.run("scan", str(w.memory), "--redact", "--yes")  # keeps journal2, value and all
        assert redacted.returncode == 0, redacted.stdout + redacted.stderr
        journal2_redacted = w.journal2.read_bytes()
        before = w.holders()
        # the check below can fail: the value is in each place it is looked for
        assert set(before) == {"markdown", "recall", "milvus.db", "backups"}, before
        assert {w.journal, w.note, w.journal2} <= set(before["markdown"])
        assert w.store_rows_holding(VALUE) >= 3

        dry = w.run("forget", "--secret", "-", "--dry-run", stdin=VALUE + "\n")
        assert dry.returncode == 0, dry.stderr
        assert "note, kept without the value" in dry.stdout and "the index: " in dry.stdout
        assert all(f.decode() not in dry.stdout + dry.stderr for f in _forms(VALUE))
        assert w.holders() == before

        proc = w.forget()
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert all(f.decode() not in out + err for f in _forms(VALUE))
        assert "The store's files hold no deleted row" in out
        assert w.holders() == {}  # nowhere: files, logs, backups, the store
        assert w.store_rows_holding(VALUE) == 0
        assert (
            "[REDACTED:forgotten]" in w.journal.read_text() and b"[REDACTED:forgotten]" in w.note.read_bytes()
        )
        search = w.run("search", "staging database password", "-j", "-k", "5")  # through the service
        assert search.returncode == 0 and VALUE not in search.stdout
        assert "[REDACTED:forgotten]" in search.stdout
        assert service.poll() is None

        listed = w.run("forget", "--undo", "--list")
        assert "forget --secret: 1 file" in listed.stdout and "needs 1 forgotten value" in listed.stdout
        refused = w.run("forget", "--undo")
        assert refused.returncode == 1 and "kept without a value memsearch forgot" in refused.stderr
        wrong = w.run("forget", "--undo", "--secret", "-", stdin="not-the-value\n")
        assert wrong.returncode == 1 and "none of the values given" in wrong.stderr
        undo = w.run("forget", "--undo", "--secret", "-", stdin=VALUE + "\n")
        assert undo.returncode == 0, undo.stderr
        assert w.note.read_bytes() == NOTE
        # journal2 changed since its scan backup (forget --secret took the value out): --force
        restore = w.run("scan", "--restore", "--secret", "-", stdin=VALUE + "\n")
        assert restore.returncode == 1 and "changed since backup" in restore.stderr
        restore = w.run("scan", "--restore", "--force", "--secret", "-", stdin=VALUE + "\n")
        assert restore.returncode == 0, restore.stderr
        assert w.journal2.read_text() == JOURNAL2 and journal2_redacted != w.journal2.read_bytes()


def test_a_forgotten_section_leaves_no_byte_in_the_store() -> None:
    w = World()
    w.plant()
    gone = "OPS-Zr81Kq"  # only in the note's section that goes (the journals keep the value)
    store = [p for p in (w.home / "milvus.db").rglob("*") if p.is_file()]
    assert any(gone.encode() in p.read_bytes() for p in store) and w.store_rows_holding(gone) == 1
    chunks = json.loads(w.run("search", "staging database password rotation", "-j", "-k", "5").stdout)
    (hit,) = [c for c in chunks if c["source"] == str(w.note) and gone in c["content"]]
    proc = w.run("forget", hit["chunk_hash"], "--yes")
    assert proc.returncode == 0, proc.stderr
    store = [p for p in (w.home / "milvus.db").rglob("*") if p.is_file()]
    assert store and not any(gone.encode() in p.read_bytes() for p in store)
    assert w.store_rows_holding(gone) == 0
    assert w.run("forget", "--undo").returncode == 0 and w.note.read_bytes() == NOTE


# --- atomicity --------------------------------------------------------------------------------


def _state(w: World) -> str:
    held = w.holders()
    if not held:
        return "after"
    if {"markdown", "recall", "milvus.db"} <= set(held) and {w.journal, w.journal2, w.note} <= set(
        held["markdown"]
    ):
        return "before"
    return f"HALF: {held}"


@pytest.mark.parametrize("stage", ["locked", "committed", "applied"])
def test_a_forget_secret_killed_at_a_stage_leaves_the_value_everywhere_or_nowhere(stage: str) -> None:
    w = World()
    w.plant()
    assert _state(w) == "before"
    proc = w.forget(pause=f"{stage}:60")
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.strip() == f"memsearch: test pause at {stage}", line + proc.stderr.read()
    if stage == "applied":
        assert _state(w).startswith("HALF")  # one file done: what a crash may leave on disk
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    done = w.run("index", str(w.memory), str(w.notes))  # completes a committed forget first
    assert done.returncode == 0, done.stderr
    assert _state(w) == ("before" if stage == "locked" else "after")


def test_forget_secrets_killed_at_random_times_leave_the_value_everywhere_or_nowhere() -> None:
    w = World()
    w.plant()
    start = time.monotonic()
    full = w.forget()
    full.communicate(timeout=300)
    duration = time.monotonic() - start
    assert full.returncode == 0 and _state(w) == "after"
    rng = random.Random(37)
    seen = []
    for _ in range(3):
        w.plant()
        assert _state(w) == "before"
        proc = w.forget()
        time.sleep(rng.uniform(0.3, duration))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        done = w.run("index", str(w.memory), str(w.notes))
        assert done.returncode == 0, done.stderr
        state = _state(w)
        assert state in ("before", "after"), state
        seen.append(state)
        with contextlib.suppress(FileNotFoundError):
            for path in (w.home / "backups").iterdir():  # start the next round with no backup
                import shutil

                shutil.rmtree(path)
    print("states after random kills:", seen)
