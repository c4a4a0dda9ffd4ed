"""The memory service started on demand, with real processes: started by `search`, used by the next
command, shown by `stats`, gone after its idle period, one for two commands started at once, never
with the setting off, never from the library.

Every process is a real ``python -m memsearch`` with the packaged ONNX model and a Milvus Lite
database in tmp_path; HOME is the test's isolated home (conftest turns autostart off; these tests
turn it back on).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_process import memsearch
from memsearch.errors import CollectionNotFoundError, MemSearchError
from memsearch.service.client import ServiceClient
from memsearch.service.paths import read_info, service_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"

pytestmark = pytest.mark.model

#: Short, so a test sees the service leave; long enough that the next command of a test finds it.
IDLE = "4"


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    memory = tmp_path / "memory"
    shutil.copytree(EXAMPLES, memory)
    uri = str(tmp_path / "ondemand.db")
    proc = memsearch("index", str(memory), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    monkeypatch.setenv("MEMSEARCH_SERVICE_IDLE_TIMEOUT", IDLE)
    yield uri
    pid = read_info(service_paths(uri)).get("pid")
    if isinstance(pid, int) and alive(pid):  # a failed test must not leave it behind
        os.kill(pid, 15)
        wait_gone(pid, 30)


def search(uri: str, query: str = "database connection timeout") -> list[dict[str, object]]:
    proc = memsearch("search", query, "-j", "-k", "3", "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


def test_search_starts_a_service_the_next_commands_use_and_it_exits_when_idle(uri: str) -> None:
    paths = service_paths(uri)
    first = search(uri)
    info = read_info(paths)
    pid = info["pid"]
    assert info["on_demand"] is True and info["idle_timeout"] == float(IDLE)
    assert alive(pid)

    # The service holds the store: a command that opened it itself would wait for the lock and fail.
    assert search(uri) == first
    expand = memsearch("expand", str(first[0]["chunk_hash"]), "--milvus-uri", uri)
    assert expand.returncode == 0, expand.stderr
    stats = memsearch("stats", "--milvus-uri", uri)
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout == (
        "Total indexed chunks: 9\n"
        f"Memory service: running (pid {pid}, started on demand, exits after {IDLE} s idle)\n"
    )
    assert read_info(paths)["pid"] == pid  # one service served them all

    assert wait_gone(pid, float(IDLE) + 15), "the on-demand service did not exit after its idle period"
    assert not paths.socket.exists() and not paths.info.exists()
    stats = memsearch("stats", "--milvus-uri", uri)
    assert stats.stdout == "Total indexed chunks: 9\n"  # stats shows a service; it starts none

    # The next search starts a new one and gets the same answer.
    assert search(uri) == first
    assert read_info(paths)["pid"] != pid


def test_two_searches_at_once_start_one_service(uri: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memsearch", "search", q, "-j", "--milvus-uri", uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for q in ("database connection timeout", "订单导出失败")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        assert json.loads(out)
    paths = service_paths(uri)
    log = paths.lock.with_suffix(".log").read_text()
    # Every process started gets its lines in the start log: one service, and no second one that
    # found the store taken and left with an error.
    assert len(log.splitlines()) == 1 and log.startswith("memsearch service for"), log
    pid = read_info(paths)["pid"]
    assert wait_gone(pid, float(IDLE) + 15)


def test_autostart_off_by_env_or_config_starts_nothing(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = service_paths(uri)
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "0")
    assert search(uri)
    assert not paths.socket.exists() and not paths.info.exists()

    monkeypatch.delenv("MEMSEARCH_SERVICE_AUTOSTART")
    assert memsearch("config", "set", "service.autostart", "false").returncode == 0
    assert search(uri)
    assert not paths.socket.exists() and not paths.info.exists()

    monkeypatch.setenv("MEMSEARCH_NO_SERVICE", "1")  # keeps commands off the service: starts none
    assert memsearch("config", "set", "service.autostart", "true").returncode == 0
    assert search(uri)
    assert not paths.socket.exists() and not paths.info.exists()


def test_the_library_never_starts_a_service(uri: str) -> None:
    code = (
        "import asyncio, sys\n"
        "from memsearch import MemSearch\n"
        "with MemSearch(milvus_uri=sys.argv[1]) as ms:\n"
        "    print(len(asyncio.run(ms.search('database timeout', top_k=2))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, uri], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "2\n"
    paths = service_paths(uri)
    assert not paths.socket.exists() and not paths.info.exists()


# --- services do not pile up; a read that fails starts nothing -----------------------------------

TINY = "# Notes\n\n## Deploy\nThe deploy script waits for the database connection before it migrates.\n"


def tiny_stores(root: Path, count: int) -> list[str]:
    """``count`` Milvus Lite stores with the same one-chunk collection: indexed once (real ONNX
    model), then the database directory copied (a copied store opens and searches like the
    original; the first test below searches every copy)."""
    notes = root / "notes"
    notes.mkdir()
    (notes / "notes.md").write_text(TINY, encoding="utf-8")
    first = root / "store00.db"
    proc = memsearch("index", str(notes), "--milvus-uri", str(first), "--provider", "onnx")
    assert proc.returncode == 0, proc.stderr
    for i in range(1, count):
        shutil.copytree(first, root / f"store{i:02d}.db")
    return [str(root / f"store{i:02d}.db") for i in range(count)]


def serve_processes(marker: str) -> dict[int, int]:
    """pid -> resident kB of every live ``memsearch serve`` process whose command line contains
    ``marker`` (a test's own folder or URI): what ``ps`` would show, independent of our run files."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if b"memsearch" not in argv or b"serve" not in argv or not any(marker.encode() in a for a in argv):
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").split()[:1] in (["Z"], ["X"]):
            continue
        found[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0])
    return found


def service_status() -> dict[str, Any]:
    proc = memsearch("service", "status", "--json-output")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def settled(marker: str, most: int, timeout: float = 20) -> dict[int, int]:
    """The serve processes of ``marker`` once at most ``most`` remain (services asked to stop exit
    after their requests in flight; that takes a moment), or as they are after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        procs = serve_processes(marker)
        if len(procs) <= most or time.monotonic() > deadline:
            return procs
        time.sleep(0.2)


@pytest.fixture
def cleanup_services(tmp_path: Path) -> Iterator[None]:
    yield
    memsearch("service", "stop", "--all")
    for pid in serve_processes(str(tmp_path)):  # only when stop failed: a test must not leave them
        os.kill(pid, 15)


def test_thirty_stores_searched_in_a_row_leave_at_most_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleanup_services: None
) -> None:
    """Before the cap, thirty stores searched in a row left thirty services (~200 MB each) running
    for their idle period; now the least recently used are asked to stop, three remain."""
    stores = tiny_stores(tmp_path, 30)
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    monkeypatch.setenv("MEMSEARCH_SERVICE_IDLE_TIMEOUT", "600")  # none leaves because it is idle
    started = time.monotonic()
    for uri in stores:
        hits = search(uri, "deploy database connection")
        assert hits and hits[0]["heading"] == "Deploy"
    took = time.monotonic() - started
    procs = settled(str(tmp_path), 3)
    status = service_status()
    listed = {s["store"]: s for s in status["services"]}
    assert set(listed) == set(stores[-3:])  # the three searched last
    assert {s["kind"] for s in listed.values()} == {"on-demand"}
    assert set(procs) == {s["pid"] for s in listed.values()}
    assert status["total"]["count"] == 3
    print(
        f"30 stores searched in {took:.1f} s: {len(procs)} memsearch serve processes left, "
        f"{sum(procs.values()) / 1024:.0f} MB resident in total "
        f"(status: {status['total']['rss_bytes'] / 2**20:.0f} MB)"
    )


def test_the_least_recently_used_on_demand_service_is_the_one_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleanup_services: None
) -> None:
    a, b, c, served = tiny_stores(tmp_path, 4)
    bad = memsearch("config", "set", "service.max_on_demand", "0")
    assert bad.returncode == 1 and bad.stderr.startswith("Error: ") and "max_on_demand" in bad.stderr
    assert memsearch("config", "set", "service.max_on_demand", "1").returncode == 0
    monkeypatch.setenv("MEMSEARCH_SERVICE_MAX_ON_DEMAND", "2")  # beats the file
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    monkeypatch.setenv("MEMSEARCH_SERVICE_IDLE_TIMEOUT", "600")
    serve = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "serve", "--milvus-uri", served],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for uri in (a, b, a, c):  # b is the least recently used when c needs room
            assert search(uri, "deploy database connection")
        settled(str(tmp_path), 3)
        kinds = {s["store"]: s["kind"] for s in service_status()["services"]}
        assert kinds == {a: "on-demand", c: "on-demand", served: "serve"}  # serve is never counted
        assert serve.poll() is None
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Hint: " in lines[0], proc.stderr
    return lines[0]


def test_thirty_failed_reads_start_no_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleanup_services: None
) -> None:
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    for i in range(30):
        command = "search" if i % 2 else "expand"
        target = "deploy" if i % 2 else "0123456789abcdef"
        proc = memsearch(command, target, "--milvus-uri", str(tmp_path / f"missing{i:02d}.db"))
        assert "No collection 'memsearch_chunks'" in one_error_line(proc)
    assert serve_processes(str(tmp_path)) == {}
    assert service_status()["services"] == []
    assert not list((Path.home() / ".memsearch" / "run").glob("*.log"))  # no start was even tried
    assert not list(tmp_path.glob("missing*"))  # and a read created no store


#: A read that cannot succeed -> (its arguments, what its one error line says). ``{db}`` is an
#: indexed store, ``{tmp}`` the test's folder; "fresh home" reads the default store of a new HOME.
FAILED_READS: dict[str, tuple[list[str], str]] = {
    "missing Lite path": (["--milvus-uri", "{tmp}/typo.db"], "No collection 'memsearch_chunks' at {tmp}/"),
    "missing collection": (["--milvus-uri", "{db}", "--collection", "nope"], "No collection 'nope' at {db}"),
    "fresh home": ([], "No collection 'memsearch_chunks' at {home}/.memsearch/milvus.db"),
    "unusable path": (["--milvus-uri", "/sys/kernel/m.db"], "at /sys/kernel/m.db"),
    "bad URI": (["--milvus-uri", "http//localhost:19530"], "Not a Milvus Lite database path: "),
    "not a database": (["--milvus-uri", "{tmp}"], "Not a Milvus Lite database path: {tmp} "),
}


@pytest.mark.parametrize("command", ["search", "expand"])
@pytest.mark.parametrize("case", sorted(FAILED_READS))
def test_a_read_that_fails_prints_its_error_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleanup_services: None, case: str, command: str
) -> None:
    args, expected = FAILED_READS[case]
    db = ""
    if "{db}" in " ".join(args):
        (db,) = tiny_stores(tmp_path, 1)
    values = {"tmp": str(tmp_path), "db": db, "home": str(Path.home())}
    args = [arg.format(**values) for arg in args]
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    target = "deploy" if command == "search" else "0123456789abcdef"
    line = one_error_line(memsearch(command, target, *args))
    assert expected.format(**values) in line
    uri = args[args.index("--milvus-uri") + 1] if "--milvus-uri" in args else str(tmp_path)
    assert serve_processes(uri) == {}
    assert not list((Path.home() / ".memsearch" / "run").glob("*.log"))  # no start was even tried


def test_an_on_demand_service_whose_store_is_missing_exits_promptly(tmp_path: Path) -> None:
    """What ``search`` starts, if a store vanished between its check and the start: the service
    answers (the read fails there) and leaves after a few seconds, not after its idle period."""
    from memsearch.service.server import MISSING_STORE_GRACE

    uri = str(tmp_path / "gone.db")
    service = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "serve", "--milvus-uri", uri, "--on-demand"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = ServiceClient(service_paths(uri))
        deadline = time.monotonic() + 60
        while True:
            assert service.poll() is None and time.monotonic() < deadline, service.stderr
            with contextlib.suppress(MemSearchError):
                if client.ping()["idle_timeout"] == 300:  # the configured idle period, unshortened
                    break
            time.sleep(0.1)
        answered = time.monotonic()
        with pytest.raises(CollectionNotFoundError):
            client.request("search", {}, {"query": "deploy", "top_k": 3})
        assert service.wait(timeout=60) == 0
        took = time.monotonic() - answered
        assert MISSING_STORE_GRACE <= took < MISSING_STORE_GRACE + 10, took
        assert not (tmp_path / "gone.db").exists()
    finally:
        if service.poll() is None:
            service.kill()
        service.communicate()
