"""The local memory service with real processes: routing, equal results, parallel use, locks, crashes.

Every process here is a real ``python -m memsearch`` with the packaged ONNX model and a Milvus Lite
database in tmp_path; HOME is the test's isolated home, so run files live under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_process import memsearch
from fake_llm_server import FakeLLMServer
from memsearch.service.client import ServiceClient
from memsearch.service.paths import service_paths
from other_user import OTHER_UID, as_other_user

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"
QUERIES = ["database connection timeout", "订单导出失败", "blue green deployment rollback"]

pytestmark = pytest.mark.model


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


def start_service(uri: str, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``memsearch serve`` for ``uri`` (more ``flags``, ``env`` over ours), once it answers ready."""
    log = Path(uri).with_suffix(".serve.log")
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "serve", "--milvus-uri", uri, *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
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


#: The memsearch modules a client may load: each imports only the standard library at module level.
CLIENT_MODULES = {
    "memsearch",
    "memsearch.callerenv",
    "memsearch.engine",
    "memsearch.errors",
    "memsearch.files",
    "memsearch.engine.operations",
    "memsearch.service",
    "memsearch.service.client",
    "memsearch.service.paths",
    "memsearch.service.protocol",
}


def test_the_service_client_loads_only_the_standard_library() -> None:
    """A routed command pays for the client alone: no third-party module, not the server, no asyncio."""
    code = (
        "import json, sys\nbefore = set(sys.modules)\nimport memsearch.service.client\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)  # what the import added to a fresh interpreter
    ours = {m for m in loaded if m == "memsearch" or m.startswith("memsearch.")}
    others = [m for m in loaded if m not in ours and m.partition(".")[0] not in sys.stdlib_module_names]
    assert others == []
    assert ours == CLIENT_MODULES
    assert "asyncio" not in loaded


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
    assert stats.stdout == (
        f"Total indexed chunks: 9\nMemory service: running (pid {proc.pid}, memsearch serve / watch)\n"
    )
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


def test_a_second_serve_stands_by_and_takes_over_when_the_first_stops(uri: str, service) -> None:
    log = Path(uri).with_suffix(".second.log")
    with log.open("w") as out:
        second = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "serve", "--milvus-uri", uri],
            stdout=out,
            stderr=out,
            text=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "standing by" not in log.read_text():
            assert second.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert (
            f"a memsearch service is already running for {Path(uri)} (pid {service.pid})" in log.read_text()
        )
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) == 0
        client = ServiceClient(service_paths(uri))
        while True:
            with contextlib.suppress(Exception):
                if client.ping().get("pid") == second.pid:
                    break
            assert time.monotonic() < deadline + 60, log.read_text()
            time.sleep(0.1)
        assert search_json(uri, QUERIES[0])  # answered by the second
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
    assert log.read_text().splitlines()[-1] == "Service stopped."


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
    while "Watching 1 path" not in log.read_text():
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
    assert f"Indexed 1 chunk from {memory / '2026-11-06.md'}" in log
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


# --- a hostile or broken environment: another user, garbage, floods, stops, crashes ----------


@pytest.fixture
def short_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME short enough that the socket stays in ``~/.memsearch/run`` (a long one moves it to
    the shared fallback folder under /tmp)."""
    home = Path(tempfile.mkdtemp(prefix="mssvc-", dir="/tmp"))
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Hint:" in lines[0], proc.stderr
    return lines[0]


def exchange(path: Path, payload: bytes, *, half_close: bool = True, timeout: float = 15) -> list[dict]:
    """Send raw bytes to the socket; return every non-heartbeat message until the service closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        with contextlib.suppress(OSError):  # the service may refuse before reading it all
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            try:
                part = sock.recv(65536)
            except ConnectionResetError:
                break
            if not part:
                break
            data += part
    messages = [json.loads(line) for line in data.splitlines() if line.strip()]
    return [m for m in messages if not m.get("alive")]


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(key)


class FakeListener:
    """A socket at ``path`` that records what clients send and never answers (an impostor)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.received = b""


@pytest.mark.parametrize("kind", ["symlink", "other-uid", "group-readable", "fallback-other-uid"])
def test_serve_refuses_a_run_dir_that_is_not_private(uri: str, tmp_path: Path, kind: str) -> None:
    paths = service_paths(uri)
    run = paths.lock.parent
    shutil.rmtree(run, ignore_errors=True)  # made private by the `index` that owned the store
    run.parent.mkdir(parents=True, exist_ok=True)
    env = None
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    if kind == "symlink":
        run.symlink_to(target)
    elif kind == "other-uid":
        run.mkdir(mode=0o700)
        os.chown(run, OTHER_UID, OTHER_UID)
    elif kind == "group-readable":
        run.mkdir(mode=0o750)
        run.chmod(0o750)
    else:  # a deep HOME puts the socket in a fallback folder; another user created it first
        os.chown(target, OTHER_UID, OTHER_UID)
        target.chmod(0o700)
        env = {"XDG_RUNTIME_DIR": str(target)}
        deep = tmp_path / ("h" * 80)
        env["HOME"] = str(deep)
        deep.mkdir()
    started = time.monotonic()
    proc = memsearch("serve", "--milvus-uri", uri, env=env, timeout=60)
    line = one_error_line(proc)
    assert "refusing to use" in line and time.monotonic() - started < 30
    expected = {
        "symlink": "symbolic link",
        "other-uid": f"owned by uid {OTHER_UID}",
        "group-readable": "mode 0750",
        "fallback-other-uid": f"{target} for the memory service: it is owned by uid {OTHER_UID}",
    }[kind]
    assert expected in line
    assert target.stat().st_mode & 0o777 == (0o700 if kind == "fallback-other-uid" else 0o755)
    assert list(target.iterdir()) == []  # nothing was created through the link


def test_clients_do_not_route_through_a_hijacked_run_dir(short_home: Path, uri: str, tmp_path: Path) -> None:
    """Another user points our run dir at theirs, with a listening socket and a held lock: the
    client must send it nothing, say so once, and search directly."""
    import fcntl

    expected = search_json(uri, QUERIES[0], env={"MEMSEARCH_NO_SERVICE": "1"})
    paths = service_paths(uri)
    evil = tmp_path / "evil"
    evil.mkdir(mode=0o777)
    evil.chmod(0o777)
    shutil.rmtree(paths.lock.parent, ignore_errors=True)  # ours, made by the commands above
    paths.lock.parent.parent.mkdir(parents=True, exist_ok=True)
    paths.lock.parent.symlink_to(evil)
    assert paths.socket.parent == paths.lock.parent  # the test's HOME is short enough
    listener = FakeListener(paths.socket)
    listener.sock.listen(16)
    listener.sock.settimeout(0.2)
    lock_fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    listener.received += conn.recv(65536)

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        proc = memsearch("search", QUERIES[0], "-j", "-k", "4", "--milvus-uri", uri)
    finally:
        stop.set()
        thread.join()
        listener.sock.close()
        os.close(lock_fd)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("Warning: ") and "symbolic link" in warnings[0]
    assert listener.received == b""


def test_client_sends_nothing_to_a_listener_of_another_uid(short_home: Path, uri: str) -> None:
    """The socket is in our private run dir, but the process listening on it runs as another
    user (SO_PEERCRED): the client must not send it a byte, and works directly instead."""
    import fcntl

    expected = search_json(uri, QUERIES[0], env={"MEMSEARCH_NO_SERVICE": "1"})
    paths = service_paths(uri)
    paths.lock.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    paths.lock.parent.chmod(0o700)
    listener = FakeListener(paths.socket)
    lock_fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)

    def serve_as_other_user() -> bytes:
        listener.sock.listen(16)  # the peer credentials a client sees are the listener's, now
        listener.sock.settimeout(20)
        received, accepted = b"", 0
        while True:
            try:
                conn, _ = listener.sock.accept()
            except TimeoutError:
                break
            accepted += 1
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    while part := conn.recv(65536):
                        received += part
            if b"done" in received:
                break
        return json.dumps({"accepted": accepted, "received": received.decode(errors="replace")}).encode()

    collect = as_other_user(serve_as_other_user)
    try:
        time.sleep(0.5)
        proc = memsearch("search", QUERIES[0], "-j", "-k", "4", "--milvus-uri", uri)
    finally:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as end:  # let the child finish
            end.connect(str(paths.socket))
            end.sendall(b"done")
        report = json.loads(collect())
        listener.sock.close()
        os.close(lock_fd)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 1 and f"uid {OTHER_UID}" in warnings[0], proc.stderr
    assert report["accepted"] >= 2  # the client did connect (and looked at who listens)
    assert report["received"] == "done"  # ... but sent nothing


def test_service_answers_nothing_to_a_client_of_another_uid(short_home: Path, uri: str, service) -> None:
    paths = service_paths(uri)
    assert paths.socket.parent == short_home / ".memsearch" / "run"
    # Loosen the folder and socket as a careless admin might: the uid check must still hold.
    for folder in (short_home, short_home / ".memsearch", paths.socket.parent):
        folder.chmod(0o755)
    paths.socket.chmod(0o777)

    def ping() -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(paths.socket))
            try:
                sock.sendall(b'{"op": "ping", "settings": {}, "args": {}}\n')
                return b"answer:" + sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):  # closed on us: nothing was answered
                return b"answer:"

    assert as_other_user(ping)() == b"answer:"
    paths.socket.parent.chmod(0o700)
    assert ServiceClient(paths).ping()["pid"] == service.pid  # we still get answers


def test_requests_are_bounded_whatever_the_client_sends(short_home: Path, uri: str, service) -> None:
    from memsearch.errors import ServiceRequestError

    paths = service_paths(uri)
    rss_before = proc_status(service.pid, "VmRSS")
    # The CLI refuses a huge --top-k itself, with one clear line.
    cli = memsearch("search", "x", "-k", "1000000000", "--milvus-uri", uri)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert "1<=x<=1000" in cli.stderr and len([ln for ln in cli.stderr.splitlines() if "Error" in ln]) == 1
    # Any other client (the Python API, a script on the socket) gets one clear error from the service.
    with pytest.raises(ServiceRequestError, match=r"top_k must be between 1 and 1000 \(got 1000000000\)"):
        ServiceClient(paths).request("search", {}, {"query": "x", "top_k": 1_000_000_000})
    with pytest.raises(ServiceRequestError, match="accepts at most 100,000"):
        ServiceClient(paths).request("search", {}, {"query": "x" * 200_000, "top_k": 3})
    with pytest.raises(ServiceRequestError, match="the memory service accepts at most 1,048,576"):
        ServiceClient(paths).request("search", {}, {"query": "x" * 2_000_000, "top_k": 3})
    # A 64 MiB request line is refused after its first MiB, not read into memory.
    replies = exchange(paths.socket, b'{"op": "search", "args": {"query": "' + b"y" * (64 << 20))
    assert len(replies) == 1 and replies[0]["ok"] is False
    assert replies[0]["error"]["type"] == "ServiceRequestError"
    assert "larger than 1,048,576 bytes" in replies[0]["error"]["message"]
    rss_after = proc_status(service.pid, "VmRSS")
    assert rss_after - rss_before < 150_000, (rss_before, rss_after)  # kB
    assert len(search_json(uri, QUERIES[0])) == 4  # and it still serves


def test_a_stopped_service_fails_routed_commands_within_the_deadline(
    short_home: Path, uri: str, memory: Path, service
) -> None:
    service.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        search = memsearch("search", QUERIES[0], "--milvus-uri", uri, timeout=60)
        search_took = time.monotonic() - started
        started = time.monotonic()
        index = memsearch(
            "index", str(memory), "--milvus-uri", uri, env={"MEMSEARCH_SERVICE_TIMEOUT": "1.5"}, timeout=60
        )
        index_took = time.monotonic() - started
    finally:
        service.send_signal(signal.SIGCONT)
    line = one_error_line(search)
    assert f"(pid {service.pid}) did not answer within 5 s" in line
    assert f"kill -CONT {service.pid}" in line
    assert "did not answer within 1.5 s" in one_error_line(index)
    assert 5 <= search_took < 15 and 1.5 <= index_took < 10, (search_took, index_took)
    assert len(search_json(uri, QUERIES[0])) == 4  # resumed, it answers again


def test_idle_connections_are_capped_and_closed(short_home: Path, uri: str, service) -> None:
    from memsearch.service.server import IDLE_TIMEOUT, MAX_CONNECTIONS

    paths = service_paths(uri)
    threads_before = proc_status(service.pid, "Threads")
    idle = []
    try:
        for _ in range(MAX_CONNECTIONS + 66):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(paths.socket))
            idle.append(sock)
        time.sleep(1.0)
        threads_busy = proc_status(service.pid, "Threads")
        assert threads_busy <= threads_before + MAX_CONNECTIONS + 4, (threads_before, threads_busy)
        for sock in idle[MAX_CONNECTIONS + 2 :]:  # the extra ones were told why, and closed
            sock.settimeout(5)
            reply = json.loads(sock.recv(65536))
            assert reply["error"]["type"] == "ServiceBusyError", reply
            assert sock.recv(1) == b""
        time.sleep(IDLE_TIMEOUT + 1.5)
        for sock in idle[: MAX_CONNECTIONS - 2]:  # the idle ones were closed after the deadline
            sock.settimeout(5)
            assert sock.recv(65536) == b""
    finally:
        for sock in idle:
            sock.close()
    assert proc_status(service.pid, "Threads") <= threads_before + 2
    assert len(search_json(uri, QUERIES[0])) == 4  # a normal client still works


def test_garbage_gets_a_protocol_error_and_pipelined_requests_get_both_answers(
    short_home: Path, uri: str, service
) -> None:
    from memsearch.service.server import IDLE_TIMEOUT

    sock_path = service_paths(uri).socket
    garbage = {
        "random bytes": os.urandom(512).replace(b"\n", b"") + b"\n",
        "random bytes, no newline": os.urandom(512).replace(b"\n", b""),
        "invalid JSON": b'{"op": "ping",\n',
        "a JSON list": b"[1, 2, 3]\n",
        "a JSON string": b'"ping"\n',
        "an unknown op": b'{"op": "rm -rf", "args": {}}\n',
        "a wrong type": b'{"op": "search", "args": {"query": "x", "top_k": "ten"}}\n',
    }
    for name, payload in garbage.items():
        replies = exchange(sock_path, payload)
        assert len(replies) == 1, (name, replies)
        assert replies[0]["ok"] is False and replies[0]["error"]["type"] == "ServiceRequestError", name
        assert replies[0]["error"]["message"].startswith("not a valid memsearch service request"), name
    ping = b'{"op": "ping", "settings": {}, "args": {}}\n'
    replies = exchange(sock_path, ping + b"not json\n" + ping)
    assert [r["ok"] for r in replies] == [True, False, True]
    assert replies[0]["result"]["pid"] == service.pid
    # Without a newline and without closing: answered once the read deadline has passed.
    started = time.monotonic()
    replies = exchange(sock_path, b'{"op": "ping"', half_close=False)
    assert IDLE_TIMEOUT - 0.5 <= time.monotonic() - started < IDLE_TIMEOUT + 5
    assert len(replies) == 1 and "incomplete request" in replies[0]["error"]["message"]


def test_kill_9_with_requests_in_flight_each_client_completes_through_the_next_owner(
    short_home: Path, uri: str, memory: Path
) -> None:
    """The owner dies with five requests in flight: each client sends its request again to the next
    owner (one of them becomes it) and completes; no chunk is lost or stored twice."""
    expected = {q: search_json(uri, q) for q in QUERIES}
    proc = start_service(uri)
    proc.send_signal(signal.SIGSTOP)  # holds every request in flight until the kill
    clients = [
        subprocess.Popen(
            [sys.executable, "-m", "memsearch", *args, "--milvus-uri", uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MEMSEARCH_SERVICE_TIMEOUT": "30"},
        )
        for args in [["search", q, "-j", "-k", "4"] for q in QUERIES] + [["index", str(memory), "--force"]]
    ]
    time.sleep(3.0)  # every client has connected and sent its request
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for client, query in zip(clients, [*QUERIES, None], strict=True):
        out, err = client.communicate(timeout=120)
        assert client.returncode == 0 and err == "", (client.args, out, err)
        if query is None:
            assert out == "Indexed 9 chunks.\n"
        else:
            assert json.loads(out) == expected[query]
    stats = memsearch("stats", "--milvus-uri", uri)  # and the next command just works
    assert stats.returncode == 0 and stats.stdout == "Total indexed chunks: 9\n", stats.stderr


@pytest.mark.parametrize("which", ["socket", "lock"])
def test_a_directory_in_place_of_the_socket_or_lock(short_home: Path, uri: str, which: str) -> None:
    paths = service_paths(uri)
    paths.lock.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    paths.lock.parent.chmod(0o700)
    getattr(paths, which).unlink(missing_ok=True)  # the lock file the `index` that owned the store left
    getattr(paths, which).mkdir()
    if which == "lock":  # a socket left behind, so clients look at the lock
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
            stale.bind(str(paths.socket))
    line = one_error_line(memsearch("serve", "--milvus-uri", uri, timeout=60))
    assert f"{getattr(paths, which)} is a directory, not the memory service's {which}" in line
    stats = memsearch("stats", "--milvus-uri", uri)
    assert stats.returncode == 0 and stats.stdout == "Total indexed chunks: 9\n", stats.stderr
    warnings = stats.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("Warning: ") and "Traceback" not in stats.stderr


def test_a_second_watch_takes_over_promptly_when_the_serving_watch_stops(
    short_home: Path, uri: str, memory: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "seed.md").write_text("# Seed\n\nNothing much.\n")
    first = _start_watch(uri, memory, tmp_path / "first.log")
    second = _start_watch(uri, other, tmp_path / "second.log")
    client = ServiceClient(service_paths(uri))
    try:
        assert client.ping()["pid"] == first.pid
        stopping = time.monotonic()
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0
        exited = time.monotonic()
        while True:
            with contextlib.suppress(Exception):
                if client.ping().get("pid") == second.pid:
                    break
            assert time.monotonic() - exited < 30, (tmp_path / "second.log").read_text()
            time.sleep(0.05)
        took_over = time.monotonic()
        assert exited - stopping < 5, exited - stopping
        assert took_over - exited < 5, took_over - exited
        (other / "new.md").write_text("# New\n\nThe heron nests by the weir.\n")
        _until_found(uri, "heron nests weir", "new.md", timeout=30)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
    assert second.returncode == 0
