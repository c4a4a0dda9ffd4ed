"""pytest plugin: a real Milvus-protocol server (``milvus-lite server``) for the server code path.

Provides the session-scoped fixture ``milvus_server_uri``: one ``milvus-lite server`` subprocess
bound to 127.0.0.1 on a free port, with its data in a temporary directory, shared by every test
of the session (tests isolate themselves by using their own collection names). Load it from a
conftest with ``pytest_plugins = ["milvus_server"]``.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 30.0  # seconds for the server to accept connections
STOP_TIMEOUT = 5.0  # seconds between terminate and kill


def milvus_lite_executable() -> str:
    """The ``milvus-lite`` console script of this interpreter's environment."""
    candidate = Path(sys.executable).with_name("milvus-lite")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("milvus-lite")
    if found is None:
        raise RuntimeError(f"milvus-lite executable not found next to {sys.executable} or on PATH")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a milvus-lite server running for the whole test session."""
    base = tmp_path_factory.mktemp("milvus-server")
    port = free_port()
    log_path = base / "server.log"
    command = [
        milvus_lite_executable(),
        "server",
        "--data-dir",
        str(base / "data"),
        "--host",
        "127.0.0.1",  # never the default 0.0.0.0
        "--port",
        str(port),
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _accepts_connections(port):
            if proc.poll() is not None:
                output = log_path.read_text(errors="replace")
                raise RuntimeError(f"milvus-lite server exited with {proc.returncode}:\n{output}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"milvus-lite server did not accept connections on 127.0.0.1:{port} within "
                    f"{START_TIMEOUT:g} s:\n{log_path.read_text(errors='replace')}"
                )
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)
