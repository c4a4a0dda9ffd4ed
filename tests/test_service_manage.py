"""``memsearch service status`` and ``memsearch service stop`` with real processes: a ``serve``, a
service started on demand, a ``watch`` and a program holding its store, each listed with its kind,
PID and memory, and each stopped over its socket (or, for the program, refused).

Every process is a real ``python -m memsearch`` (or ``python -c`` for the program) with the
packaged ONNX model and Milvus Lite stores in tmp_path; HOME is the test's isolated home.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_process import memsearch
from memsearch.files import lock_is_held
from memsearch.service.client import ServiceClient
from memsearch.service.paths import read_info, service_paths

pytestmark = pytest.mark.model

TINY = "# Notes\n\n## Deploy\nThe deploy script waits for the database connection before it migrates.\n"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(pid)


@pytest.fixture
def stores(tmp_path: Path) -> list[str]:
    """Three stores with the same one-chunk collection (indexed once, then copied)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.md").write_text(TINY, encoding="utf-8")
    first = tmp_path / "a.db"
    proc = memsearch("index", str(notes), "--milvus-uri", str(first), "--provider", "onnx")
    assert proc.returncode == 0, proc.stderr
    for name in ("b.db", "c.db"):
        shutil.copytree(first, tmp_path / name)
    return [str(tmp_path / name) for name in ("a.db", "b.db", "c.db")]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Background processes of a test, ended (SIGTERM, then SIGKILL) if a test fails midway."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def background(procs: list[subprocess.Popen[str]], log: Path, *args: str) -> subprocess.Popen[str]:
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)
    procs.append(proc)
    return proc


def wait_served(uri: str, proc: subprocess.Popen[str], log: Path) -> None:
    """Until the service of ``uri`` answers as ``proc`` and is ready."""
    client = ServiceClient(service_paths(uri))
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        try:
            if client.ping().get("pid") == proc.pid and client.ping().get("ready"):
                return
        except Exception:
            pass
        time.sleep(0.1)


def status_json() -> dict[str, Any]:
    proc = memsearch("service", "status", "--json-output")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Hint: " in lines[0], proc.stderr
    return lines[0]


def test_status_lists_every_service_and_stop_ends_each(
    tmp_path: Path, stores: list[str], procs: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = stores
    none = memsearch("service", "status")
    assert (none.returncode, none.stdout, none.stderr) == (0, "No memory service is running.\n", "")
    assert status_json() == {"services": [], "total": {"count": 0, "rss_bytes": 0}}

    serve_log, watch_log = tmp_path / "serve.log", tmp_path / "watch.log"
    serve = background(procs, serve_log, sys.executable, "-m", "memsearch", "serve", "--milvus-uri", a)
    wait_served(a, serve, serve_log)
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    found = memsearch("search", "deploy", "-j", "--milvus-uri", b)
    assert found.returncode == 0 and json.loads(found.stdout), found.stderr
    on_demand = read_info(service_paths(b))["pid"]
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "w.md").write_text("# Watched\n\nThe heron nests by the weir.\n", encoding="utf-8")
    watch = background(
        procs, watch_log, sys.executable, "-m", "memsearch", "watch", str(folder), "--milvus-uri", c
    )
    deadline = time.monotonic() + 120
    while "Watching 1 path" not in watch_log.read_text():
        assert watch.poll() is None and time.monotonic() < deadline, watch_log.read_text()
        time.sleep(0.1)

    first = status_json()
    listed = {s["store"]: s for s in first["services"]}
    assert {store: (s["kind"], s["pid"], s["state"]) for store, s in listed.items()} == {
        a: ("serve", serve.pid, "running"),
        b: ("on-demand", on_demand, "running"),
        c: ("watch", watch.pid, "running"),
    }
    for s in listed.values():
        assert 40 * 2**20 < s["rss_bytes"] < 2**31, s
        assert abs(s["rss_bytes"] / 1024 - rss_kb(s["pid"])) < 100_000  # what /proc says, in kB
        assert s["uptime"] > 0 and s["idle"] >= 0
    assert "serve --milvus-uri" in listed[a]["command"] and "--on-demand" in listed[b]["command"]
    assert "watch" in listed[c]["command"] and listed[b]["idle_timeout"] == 300
    assert first["total"] == {"count": 3, "rss_bytes": sum(s["rss_bytes"] for s in listed.values())}

    time.sleep(1.5)
    again = {s["store"]: s for s in status_json()["services"]}
    assert again[b]["idle"] >= listed[b]["idle"] + 1.4  # asking how a service is does not use it

    plain = memsearch("service", "status")
    lines = plain.stdout.splitlines()
    assert lines[0].split() == ["PID", "KIND", "UPTIME", "IDLE", "RSS", "STORE"]
    assert sorted(line.split()[1] for line in lines[1:4]) == ["on-demand", "serve", "watch"]
    assert all(line.endswith((a, b, c)) for line in lines[1:4])
    assert lines[4].startswith("Total: 3 services, ") and lines[4].endswith(" MB resident.")

    stopped = memsearch("service", "stop", "--milvus-uri", b)
    assert (stopped.returncode, stopped.stderr) == (0, "")
    assert stopped.stdout == f"Stopped the memory service for {b} (pid {on_demand}, on-demand).\n"
    assert not lock_is_held(service_paths(b).lock)  # stop returns once the store is free
    assert wait_gone(on_demand)

    stopped = memsearch("service", "stop", "--milvus-uri", c)
    assert stopped.stdout == f"Stopped the memory service for {c} (pid {watch.pid}, watch).\n"
    assert watch.wait(timeout=30) == 0
    assert watch_log.read_text().rstrip().endswith("Stopping watcher.")

    everything = memsearch("service", "stop", "--all")
    assert everything.stdout == f"Stopped the memory service for {a} (pid {serve.pid}, serve).\n"
    assert serve.wait(timeout=30) == 0
    assert serve_log.read_text().rstrip().endswith("Service stopped.")
    assert memsearch("service", "status").stdout == "No memory service is running.\n"
    again_stop = memsearch("service", "stop", "--milvus-uri", a)
    assert (again_stop.returncode, again_stop.stdout) == (0, f"No memory service is running for {a}.\n")


def test_stop_all_ends_the_watches_that_joined_a_service(
    tmp_path: Path, stores: list[str], procs: list[subprocess.Popen[str]]
) -> None:
    """A ``watch`` started while a ``serve`` held the store joins that service; ``stop --all``
    used to stop the service and leave the watch, which took the store over and served it on."""
    a = stores[0]
    serve_log, watch_log = tmp_path / "serve.log", tmp_path / "watch.log"
    serve = background(procs, serve_log, sys.executable, "-m", "memsearch", "serve", "--milvus-uri", a)
    wait_served(a, serve, serve_log)
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "w.md").write_text("# Watched\n\nThe heron nests by the weir.\n", encoding="utf-8")
    watch = background(
        procs, watch_log, sys.executable, "-m", "memsearch", "watch", str(folder), "--milvus-uri", a
    )
    deadline = time.monotonic() + 120
    while "Watching 1 path" not in watch_log.read_text():
        assert watch.poll() is None and time.monotonic() < deadline, watch_log.read_text()
        time.sleep(0.1)
    assert [(s["kind"], s["pid"]) for s in status_json()["services"]] == [("serve", serve.pid)]

    everything = memsearch("service", "stop", "--all")
    assert (everything.returncode, everything.stderr) == (0, "")
    assert everything.stdout == f"Stopped the memory service for {a} (pid {serve.pid}, serve).\n"
    assert serve.wait(timeout=30) == 0 and watch.wait(timeout=30) == 0
    assert (
        watch_log.read_text()
        .rstrip()
        .endswith("The memory service was asked to stop (memsearch service stop).\nStopping watcher.")
    )
    assert memsearch("service", "status").stdout == "No memory service is running.\n"


PROGRAM = """\
import sys
from memsearch import MemSearch

with MemSearch(milvus_uri=sys.argv[1]) as ms:
    ms.count()  # its first use: nobody owns the store, so this program does, and serves it
    print("serving", flush=True)
    sys.stdin.read()
print("released", flush=True)
"""


def test_a_program_holding_its_store_is_listed_but_not_stopped(
    tmp_path: Path, stores: list[str], procs: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = stores
    script = tmp_path / "holder_app.py"
    script.write_text(PROGRAM, encoding="utf-8")
    program = subprocess.Popen(
        [sys.executable, str(script), a], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    procs.append(program)
    assert program.stdout is not None and program.stdout.readline() == "serving\n"
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    assert memsearch("search", "deploy", "--milvus-uri", b).returncode == 0
    on_demand = read_info(service_paths(b))["pid"]

    listed = {s["store"]: s for s in status_json()["services"]}
    assert (listed[a]["kind"], listed[a]["pid"]) == ("program", program.pid)
    assert listed[a]["command"] == f"{sys.executable} {script} {a}"
    plain = memsearch("service", "status").stdout
    assert f"{a} ({sys.executable} {script} {a})" in plain  # which program it is

    refused = one_error_line(memsearch("service", "stop", "--milvus-uri", a))
    assert f"process {program.pid} ({sys.executable} {script} {a})" in refused
    assert "releases the store when that program closes its MemSearch or exits" in refused
    assert ServiceClient(service_paths(a)).ping()["pid"] == program.pid  # still serving

    everything = memsearch("service", "stop", "--all")
    assert everything.stdout == f"Stopped the memory service for {b} (pid {on_demand}, on-demand).\n"
    assert f"process {program.pid}" in one_error_line(everything)
    assert wait_gone(on_demand) and program.poll() is None

    rest, _ = program.communicate(timeout=30)  # closes its stdin: it lets go of its store
    assert program.returncode == 0 and rest == "released\n"
    assert memsearch("service", "status").stdout == "No memory service is running.\n"
