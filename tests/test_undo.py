"""Nothing lost by cleaning: ``forget --undo`` and ``scan --restore`` give files back byte for byte.

Real ``python -m memsearch`` processes, the packaged ONNX model and Milvus Lite. What is checked:
a forget of a hand-written note's section is kept (private, 0600) and undone byte for byte, the
text searchable again; journal entries are not kept; a restore refuses a file changed since
(``--force`` keeps what it overwrites), keeps text appended since; ``scan --redact`` shows what it
will change (masked), asks, keeps the journals, and ``scan --restore`` gives them back. Atomicity:
a forget, an undo and a ``scan --redact`` killed with SIGKILL at each pause point, and an undo
killed at random times, leave the files as before or (after the next command) as after.
"""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_process import memsearch

pytestmark = pytest.mark.model

NOTE = (
    "# Garden notes\r\n\r\n## Irrigation\r\n\r\nThe drip line runs at dawn for twenty minutes.\r\n\r\n"
    "## Compost\r\n\r\nTurn the compost heap with the pitchfork every fortnight. caf\xe9\r\n"
).encode("latin-1")  # CRLF line breaks and a byte that is not UTF-8: kept exactly
JOURNAL = """# 2026-03-24

## Session 09:00

### 09:00
<!-- session:s1 turn:t1 -->
- User asked why the zebrafish aquarium heater trips
- Deployed with GITHUB_TOKEN=ghp_{token}

### 09:30
<!-- session:s1 turn:t2 -->
- User asked about the porcupine in the garden
"""
TOKEN = "Zx9Qw" * 8


class World:
    """A project with a journal and a hand-written note, indexed into a store in tmp_path."""

    def __init__(self, tmp_path: Path) -> None:
        self.uri = str(tmp_path / "undo.db")
        self.dir = Path.cwd() / ".memsearch" / "memory"
        self.journal = self.dir / "2026-03-24.md"
        self.journal2 = self.dir / "2026-03-25.md"
        self.note = Path.cwd() / "notes" / "garden.md"

    def write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.note.parent.mkdir(exist_ok=True)
        self.journal.write_text(JOURNAL.format(token=TOKEN), encoding="utf-8")
        self.journal2.write_text(f"# 2026-03-25\n\n### 08:00\n- token ghp_{TOKEN[::-1]} again\n")
        self.note.write_bytes(NOTE)

    def run(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        if stdin is None:
            return memsearch(*args, "--milvus-uri", self.uri, env=env)
        return subprocess.run(
            [sys.executable, "-m", "memsearch", *args, "--milvus-uri", self.uri],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, **(env or {})},
        )

    def start(self, *args: str, pause: str = "") -> subprocess.Popen[str]:
        env = {**os.environ, "MEMSEARCH_TEST_FORGET_PAUSE": pause} if pause else None
        return subprocess.Popen(
            [sys.executable, "-m", "memsearch", *args, "--milvus-uri", self.uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def index(self) -> None:
        proc = self.run("index", str(self.dir), str(self.note.parent))
        assert proc.returncode == 0, proc.stderr

    def found(self, words: str) -> bool:
        proc = self.run("search", words, "-j", "-k", "3")
        assert proc.returncode == 0, proc.stderr
        import json

        return any(words.split()[-1] in r["content"] for r in json.loads(proc.stdout))

    def chunk_of(self, words: str) -> str:
        import json

        proc = self.run("search", words, "-j", "-k", "5")
        (hit,) = [r for r in json.loads(proc.stdout) if words.split()[-1] in r["content"]]
        return str(hit["chunk_hash"])

    def backups(self, command: str = "forget") -> str:
        flag = "--undo" if command == "forget" else "--restore"
        proc = self.run(command, flag, "--list")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    w.write()
    w.index()
    return w


def _backup_files() -> list[Path]:
    return [p for p in (Path(os.environ["HOME"]) / ".memsearch" / "backups").rglob("*") if p.is_file()]


def test_a_forgotten_section_of_a_note_comes_back_byte_for_byte(world: World) -> None:
    chunk = world.chunk_of("compost heap pitchfork")
    proc = world.run("forget", chunk, "--yes")
    assert proc.returncode == 0, proc.stderr
    assert b"pitchfork" not in world.note.read_bytes() and not world.found("compost heap pitchfork")
    assert "Kept the notes as they were: backup " in proc.stdout
    listed = world.backups()
    assert "forget: 1 file" in listed and str(world.note) in listed
    for path in _backup_files():  # private, whatever the umask
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent

    undo = world.run("forget", "--undo")
    assert undo.returncode == 0, undo.stderr
    assert f"Restored {world.note}" in undo.stdout
    assert world.note.read_bytes() == NOTE
    assert world.found("compost heap pitchfork")  # indexed again
    assert "No backups" in world.backups() and _backup_files() == []
    again = world.run("forget", "--undo")
    assert again.returncode == 1 and again.stderr.startswith("Error: nothing to restore")


def test_journal_entries_are_not_kept_and_a_journal_forget_says_so(world: World) -> None:
    asked = world.run("forget", "--turn", "t2", stdin="n\n")
    assert "journal entries are not" not in asked.stdout  # only journals: nothing is kept
    proc = world.run("forget", "--turn", "t2", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "porcupine" not in world.journal.read_text() and "Kept the notes" not in proc.stdout
    assert "No backups of `memsearch forget` are kept." in world.backups()


def test_an_undo_refuses_a_changed_file_force_loses_nothing_and_an_appended_tail_stays(world: World) -> None:
    proc = world.run("forget", world.chunk_of("compost heap pitchfork"), "--yes")
    assert proc.returncode == 0, proc.stderr
    edited = b"# Garden notes\n\nRewritten by hand since.\n"
    world.note.write_bytes(edited)
    refused = world.run("forget", "--undo")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith("Error: ") and "changed since backup" in refused.stderr
    assert "--force" in refused.stderr and world.note.read_bytes() == edited  # nothing changed

    forced = world.run("forget", "--undo", "--force")
    assert forced.returncode == 0, forced.stderr
    assert world.note.read_bytes() == NOTE and world.found("compost heap pitchfork")
    listed = world.backups()
    assert "overwritten by restoring" in listed  # the hand edit is kept, and can come back
    kept_id = listed.split("\n")[1].split()[0]
    back = world.run("forget", "--undo", kept_id)
    assert back.returncode == 0, back.stderr
    assert world.note.read_bytes() == edited

    world.note.write_bytes(NOTE)
    world.index()
    proc = world.run("forget", world.chunk_of("compost heap pitchfork"), "--yes")
    assert proc.returncode == 0, proc.stderr
    tail = b"\r\n## Later\r\n\r\nAdded after the forget.\r\n"
    world.note.write_bytes(world.note.read_bytes() + tail)
    undo = world.run("forget", "--undo")
    assert undo.returncode == 0, undo.stderr
    assert "the text added since was kept at its end" in undo.stdout
    assert world.note.read_bytes() == NOTE + tail


def test_scan_redact_shows_asks_keeps_and_scan_restore_gives_the_journals_back(world: World) -> None:
    originals = {p: p.read_bytes() for p in (world.journal, world.journal2)}
    declined = world.run("scan", str(world.dir), "--redact", stdin="n\n")
    assert declined.returncode == 1 and "scan declined: nothing was changed" in declined.stderr
    assert f"{world.journal}:8: " in declined.stdout and "ghp_***** (44 chars)" in declined.stdout
    assert TOKEN not in declined.stdout + declined.stderr
    assert {p: p.read_bytes() for p in originals} == originals

    done = world.run("scan", str(world.dir), "--redact", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Redacted 1 item in" in done.stdout and "No secrets found in 2 files." in done.stdout
    for path in originals:
        assert TOKEN not in path.read_text() and TOKEN[::-1] not in path.read_text()
    assert "[REDACTED:" in world.journal.read_text() and world.found("zebrafish aquarium heater")
    assert "scan --redact: 2 files" in world.backups("scan")

    restored = world.run("scan", "--restore")
    assert restored.returncode == 0, restored.stderr
    assert {p: p.read_bytes() for p in originals} == originals
    assert "2 files" in restored.stdout and "No backups" in world.backups("scan")
    assert world.found("zebrafish aquarium heater")


# --- atomicity --------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["locked", "committed"])
def test_a_note_forget_killed_at_a_stage_ends_before_or_after_with_its_backup(
    world: World, stage: str
) -> None:
    chunk = world.chunk_of("compost heap pitchfork")
    proc = world.start("forget", chunk, "--yes", pause=f"{stage}:60")
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.strip() == f"memsearch: test pause at {stage}", line + proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    world.index()  # completes a committed forget (and tidies a pending backup nobody committed)
    if stage == "locked":
        assert world.note.read_bytes() == NOTE and "No backups" in world.backups()
        assert _backup_files() == []
        return
    assert b"pitchfork" not in world.note.read_bytes() and "forget: 1 file" in world.backups()
    undo = world.run("forget", "--undo")
    assert undo.returncode == 0, undo.stderr
    assert world.note.read_bytes() == NOTE


def test_an_undo_killed_after_it_committed_is_completed_by_the_next_command(world: World) -> None:
    proc = world.run("forget", world.chunk_of("compost heap pitchfork"), "--yes")
    assert proc.returncode == 0, proc.stderr
    undo = world.start("forget", "--undo", pause="restore-committed:60")
    assert undo.stderr is not None
    assert "test pause at restore-committed" in undo.stderr.readline()
    assert b"pitchfork" not in world.note.read_bytes()  # committed, not yet written
    undo.send_signal(signal.SIGKILL)
    undo.communicate()
    world.index()
    assert world.note.read_bytes() == NOTE and "No backups" in world.backups()
    assert world.found("compost heap pitchfork")


def test_undos_killed_at_random_times_never_leave_half(world: World) -> None:
    forgot = world.run("forget", world.chunk_of("compost heap pitchfork"), "--yes")
    assert forgot.returncode == 0, forgot.stderr
    after = world.note.read_bytes()
    start = time.monotonic()
    full = world.run("forget", "--undo")
    duration = time.monotonic() - start
    assert full.returncode == 0 and world.note.read_bytes() == NOTE
    rng = random.Random(36)
    seen = []
    for _ in range(4):
        world.write()
        world.index()
        proc = world.run("forget", world.chunk_of("compost heap pitchfork"), "--yes")
        assert proc.returncode == 0, proc.stderr
        undo = world.start("forget", "--undo")
        time.sleep(rng.uniform(0.02, min(duration, 0.2)))  # it commits within ~0.1 s, then reindexes
        undo.send_signal(signal.SIGKILL)
        undo.communicate()
        world.index()
        state = {NOTE: "restored", after: "not restored"}.get(world.note.read_bytes(), "HALF")
        assert state != "HALF", world.note.read_bytes()
        if state == "not restored":  # the backup is still there and works
            again = world.run("forget", "--undo")
            assert again.returncode == 0, again.stderr
        assert world.note.read_bytes() == NOTE
        seen.append(state)
    print("states after random kills:", seen)


@pytest.mark.parametrize("stage", ["locked", "committed", "applied"])
def test_a_scan_redact_killed_at_a_stage_ends_before_or_after(world: World, stage: str) -> None:
    originals = {p: p.read_bytes() for p in (world.journal, world.journal2)}
    proc = world.start("scan", str(world.dir), "--redact", "--yes", pause=f"{stage}:60")
    assert proc.stderr is not None
    assert f"test pause at {stage}" in proc.stderr.readline()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    completed = world.run("scan", str(world.dir))  # completes a committed redact first
    texts = [p.read_text() for p in originals]
    if stage == "locked":
        assert {p: p.read_bytes() for p in originals} == originals and completed.returncode == 1
        assert "No backups" in world.backups("scan")
        return
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert all(TOKEN not in t and TOKEN[::-1] not in t for t in texts)
    restored = world.run("scan", "--restore")
    assert restored.returncode == 0, restored.stderr
    assert {p: p.read_bytes() for p in originals} == originals
