"""The memory service started on demand, with real processes: started by `search`, used by the next
command, shown by `stats`, gone after its idle period, one for two commands started at once, never
with the setting off, never from the library.

Every process is a real ``python -m memsearch`` with the packaged ONNX model and a Milvus Lite
database in tmp_path; HOME is the test's isolated home (conftest turns autostart off; these tests
turn it back on).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_process import memsearch
from memsearch.service import read_info, service_paths

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
