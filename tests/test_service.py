"""The local memory service with real processes: routing, equal results, parallel use, locks, crashes.

Every process here is a real ``python -m memsearch`` with the packaged ONNX model and a Milvus Lite
database in tmp_path; HOME is the test's isolated home, so run files live under it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer
from memsearch.service import ServiceClient, service_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"
QUERIES = ["database connection timeout", "订单导出失败", "blue green deployment rollback"]

pytestmark = pytest.mark.model


def memsearch(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def search_json(uri: str, query: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    proc = memsearch("search", query, "-j", "-k", "4", "--milvus-uri", uri, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    shutil.copytree(EXAMPLES, root)
    return root


@pytest.fixture
def uri(tmp_path: Path, memory: Path) -> str:
    uri = str(tmp_path / "svc.db")
    proc = memsearch("index", str(memory), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return uri


def start_service(uri: str) -> subprocess.Popen[str]:
    log = Path(uri).with_suffix(".serve.log")
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "serve", "--milvus-uri", uri],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    client = ServiceClient(service_paths(uri))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            info = client.ping()
            if info.get("pid") == proc.pid and info.get("ready"):
                return proc
        except Exception:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("service did not come up")


@pytest.fixture
def service(uri: str) -> Iterator[subprocess.Popen[str]]:
    proc = start_service(uri)
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not service_paths(uri).socket.exists()


def test_results_are_identical_with_and_without_the_service(uri: str) -> None:
    direct = [search_json(uri, q) for q in QUERIES]
    proc = start_service(uri)
    try:
        routed = [search_json(uri, q) for q in QUERIES]
        hit = routed[0][0]
        via_service = memsearch("expand", str(hit["chunk_hash"]), "-j", "--milvus-uri", uri)
        stats = memsearch("stats", "--milvus-uri", uri)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert routed == direct
    assert stats.stdout == "Total indexed chunks: 9\n"
    direct_expand = memsearch("expand", str(hit["chunk_hash"]), "-j", "--milvus-uri", uri)
    assert via_service.returncode == 0 and via_service.stdout == direct_expand.stdout


def test_parallel_searches_index_and_appends_while_serving(uri: str, memory: Path, service) -> None:
    expected = search_json(uri, QUERIES[0])
    journal = memory / "2026-11-05.md"
    journal.write_text("# 2026-11-05\n\n## Session 08:00\n", encoding="utf-8")

    def append(n: int) -> None:
        with journal.open("a", encoding="utf-8") as fh:
            fh.write(f"\n### 08:{n:02d}\n- Turn {n}: the kafka consumer lag alarm fired again.\n")

    writers = [threading.Thread(target=append, args=(n,)) for n in range(10)]
    searches = [
        subprocess.Popen(
            [sys.executable, "-m", "memsearch", "search", QUERIES[0], "-j", "-k", "4", "--milvus-uri", uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    index = memsearch("index", str(memory), "--milvus-uri", uri)
    outputs = [p.communicate(timeout=120) for p in searches]
    assert index.returncode == 0, index.stderr
    assert index.stdout == "Indexed 10 chunks.\n"
    for p, (out, err) in zip(searches, outputs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out) == expected
    hits = search_json(uri, "kafka consumer lag alarm")
    assert Path(str(hits[0]["source"])).name == "2026-11-05.md"


def test_direct_open_waits_then_names_the_service(uri: str, service) -> None:
    config = Path.home() / ".memsearch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[milvus]\nlock_timeout = 1.5\n", encoding="utf-8")
    started = time.monotonic()
    proc = memsearch("stats", "--milvus-uri", uri, env={"MEMSEARCH_NO_SERVICE": "1"})
    elapsed = time.monotonic() - started
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert f"process {service.pid}" in lines[0] and "serve" in lines[0]
    assert 1.5 <= elapsed < 20


def test_a_second_service_for_the_same_store_refuses(uri: str, service) -> None:
    proc = memsearch("serve", "--milvus-uri", uri, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: a memsearch service is already running for ")
    assert f"(pid {service.pid})" in proc.stderr


def test_a_crashed_service_is_detected_and_cleaned(uri: str) -> None:
    proc = start_service(uri)
    paths = service_paths(uri)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert paths.socket.exists()  # left behind by kill -9
    stats = memsearch("stats", "--milvus-uri", uri)
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout == "Total indexed chunks: 9\n"
    assert not paths.socket.exists() and not paths.info.exists()


def _start_watch(uri: str, folder: Path, log: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsearch",
                "watch",
                str(folder),
                "--milvus-uri",
                uri,
                "--debounce-ms",
                "200",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    deadline = time.monotonic() + 120
    while "Watching 1 path(s)" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc


def _until_found(uri: str, query: str, name: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(Path(str(h["source"])).name == name for h in search_json(uri, query)):
            return
        time.sleep(0.3)
    raise AssertionError(f"{name} not found by {query!r}")


def test_search_keeps_working_while_watch_runs(uri: str, memory: Path, tmp_path: Path) -> None:
    """The original's most-reported failure: a running watch blocked every search."""
    watch = _start_watch(uri, memory, tmp_path / "watch.log")
    try:
        assert service_paths(uri).socket.exists()  # the watch process serves the store
        assert Path(str(search_json(uri, QUERIES[0])[0]["source"])).name == "2026-11-02.md"
        (memory / "2026-11-06.md").write_text("# 2026-11-06\n\n### 09:00\n- The flux capacitor overheated.\n")
        _until_found(uri, "flux capacitor overheated", "2026-11-06.md")
    finally:
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=60) == 0
    log = (tmp_path / "watch.log").read_text()
    assert f"Indexed 1 chunks from {memory / '2026-11-06.md'}" in log
    assert log.rstrip().endswith("Stopping watcher.")
    assert not service_paths(uri).socket.exists()


def test_watch_joins_a_running_service(uri: str, memory: Path, tmp_path: Path, service) -> None:
    watch = _start_watch(uri, memory, tmp_path / "watch.log")
    try:
        (memory / "notes.md").write_text("# Notes\n\nThe sourdough starter needs feeding at noon.\n")
        _until_found(uri, "sourdough starter feeding", "notes.md")
    finally:
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=60) == 0
    assert service.poll() is None  # the service outlives the watch that joined it
    (memory / "later.md").write_text("# Later\n\nWritten after the watch ended.\n")
    time.sleep(1.0)  # longer than the debounce: a leftover watcher would have indexed it
    assert all(Path(str(h["source"])).name != "later.md" for h in search_json(uri, "written after the watch"))


def test_compact_works_while_the_service_holds_the_store(
    uri: str, memory: Path, tmp_path: Path, service, fake_llm: FakeLLMServer
) -> None:
    fake_llm.reply("- The team moved checkout to a larger connection pool.")
    out = tmp_path / "out"
    proc = memsearch(
        "compact",
        "--milvus-uri",
        uri,
        "--llm-base-url",
        f"{fake_llm.url}/v1",
        "--llm-api-key",
        "sk-test",
        "--output-dir",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Compact complete. Summary:\n\n- The team moved checkout")
    daily = next((out / "memory").glob("*.md"))
    assert "## Memory Compact" in daily.read_text()
    hits = search_json(uri, "larger connection pool checkout")
    assert any(Path(str(h["source"])) == daily.resolve() for h in hits)
