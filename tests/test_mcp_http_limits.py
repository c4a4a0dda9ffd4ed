"""``memsearch mcp --http-port`` under a flood of connections that send half a request (no token
needed for that): a real server process with its open-files limit lowered, the SDK's own client as
the token holder, and raw sockets as the flood (``memsearch.mcp.http_limits``)."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsearch.mcp.http_limits import HEAD_SECONDS, connection_cap
from test_mcp import _free_port, _project, call

pytestmark = pytest.mark.model

#: The server's open-files limit in this test (the common default is 1,024; 256 keeps the flood small).
OPEN_FILES = 256
HALF_A_REQUEST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def _lowered() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, hard))


def _half_request(port: int) -> socket.socket | None:
    sock = socket.socket()
    sock.settimeout(3)
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(HALF_A_REQUEST)
    except OSError:
        sock.close()
        return None
    return sock


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_a_flood_of_half_sent_requests_neither_wedges_nor_starves_the_token_holder(
    isolated_env: Path,
) -> None:
    """Before, ~1,100 such connections (under a limit of 1,024) used every descriptor: the token
    holder timed out, and the server still refused requests a minute after they were closed. Now
    it holds at most ``connection_cap()`` of them, closing the longest-waiting one for each
    newcomer, answers the token holder during the flood and right after it, and cuts off a
    connection that does not finish its request within ``HEAD_SECONDS``."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def search(url: str, token: str) -> float:
        """A token holder's whole session (connect, initialize, search): its seconds."""
        started = time.monotonic()
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=20) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            error, text = await call(client, "search", {"query": "invoice PDF export"})
            assert not error and "WeasyPrint" in text, text
        return time.monotonic() - started

    project = _project(isolated_env)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    flood: list[socket.socket] = []
    with subprocess.Popen(
        [sys.executable, "-m", "memsearch", "mcp", "--http-port", str(port)],
        cwd=project,
        preexec_fn=_lowered,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # read only at the end: a server that logs per failed accept blocks
        text=True,
    ) as proc:
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    assert httpx2.post(url, json={}, timeout=5).status_code == 401
                    break
                except httpx2.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                    time.sleep(0.2)
            token = (Path(os.environ["HOME"]) / ".memsearch" / "mcp-token").read_text().strip()
            await search(url, token)  # the store and the model open: their descriptors are taken

            stop = threading.Event()
            most = [0]

            def keep_flooding() -> None:
                while (not stop.is_set() or len(flood) < 300) and len(flood) < 600:
                    sock = _half_request(port)
                    if sock is not None:
                        flood.append(sock)
                    if len(flood) % 25 == 0:
                        most[0] = max(most[0], _descriptors(proc.pid))
                    time.sleep(0.002)

            flooder = threading.Thread(target=keep_flooding, daemon=True)
            flooder.start()
            while len(flood) < 150:
                time.sleep(0.05)
            during = await search(url, token)  # while new half-sent requests keep coming
            stop.set()
            flooder.join(timeout=60)
            assert len(flood) >= 300
            assert most[0] < OPEN_FILES - 32, most[0]  # never near the limit
            cap = connection_cap(OPEN_FILES)
            settled = time.monotonic() + 10  # (the last ones may still wait to be accepted)
            while (held := sum(1 for sock in flood if _still_open(sock))) > cap:
                assert time.monotonic() < settled, (held, cap)  # the rest were closed by the server
                time.sleep(0.2)
            for sock in flood:
                sock.close()
            # alone (no newcomer to make room for), a half-sent request is cut off in HEAD_SECONDS
            slow = _half_request(port)
            assert slow is not None
            opened = time.monotonic()
            after = await search(url, token)
            assert during < 15 and after < 5, (during, after)
            slow.settimeout(HEAD_SECONDS + 10)
            assert slow.recv(100) == b""
            assert HEAD_SECONDS - 1 < time.monotonic() - opened < HEAD_SECONDS + 5
            slow.close()
        finally:
            for sock in flood:
                sock.close()
            proc.terminate()
            _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "out of system resource" not in err, err


def _still_open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (it has not closed its end)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
