"""A total deadline per remote embedding request (``embedding.timeout``), as real CLI processes.

The failure this guards against: an embedding server that accepts the connection and never
answers. Before, ``memsearch index``/``search`` waited one read timeout per attempt (the openai
SDK also retried a timeout), i.e. minutes. Now each request has one deadline, after which the
command prints one ``Error:`` line, exits non-zero, and the index keeps everything it had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_servers import FakeEmbeddingServer, fake_api  # noqa: F401  (fixture)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


def memsearch(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1"},
    )
    return proc, time.monotonic() - started


# The openai provider goes through the openai SDK; ollama through the stdlib REST helper.
PROVIDERS = {"openai": "/v1", "ollama": ""}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_silent_server_fails_within_the_deadline_and_keeps_the_index(
    provider: str,
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    home = tmp_path / "home"
    (home / ".memsearch").mkdir(parents=True, exist_ok=True)
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "{provider}"\nmodel = "m"\n'
        f'base_url = "{fake_api.url}{PROVIDERS[provider]}"\ntimeout = 1\n'
        f'[milvus]\nuri = "{tmp_path / "deadline.db"}"\n'
    )
    memory = tmp_path / "memory"
    shutil.copytree(EXAMPLES, memory)
    proc, _ = memsearch(home, "index", str(memory))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Indexed 9 chunks.\n"

    # New text to embed, and a server that takes the request and never answers (for a minute).
    (memory / "2026-11-05.md").write_text("## Session 08:00\n\n### 08:00\nThe nightly backup job stalled.\n")
    with (memory / "decisions.md").open("a") as f:
        f.write("\n## Storage\n\nKeep the nightly backups for thirty days.\n")
    fake_api.delay(60)
    asked = len(fake_api.requests)

    proc, took = memsearch(home, "index", str(memory))
    assert proc.returncode == 1
    assert took < 12  # interpreter and Milvus Lite start-up plus one 1 s deadline, not a minute
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: ")
    assert "did not answer within 1 s" in lines[0]
    assert len(fake_api.requests) == asked + 1  # the timed-out request was not retried

    proc, took = memsearch(home, "search", "nightly backup")
    assert proc.returncode == 1 and took < 12
    assert proc.stderr.startswith("Error: ") and "did not answer within 1 s" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

    fake_api.clear()
    proc, _ = memsearch(home, "stats")
    assert proc.stdout == "Total indexed chunks: 9\n"  # nothing deleted by the failed run
    proc, _ = memsearch(home, "index", str(memory))
    assert proc.returncode == 0, proc.stderr


def test_post_json_deadline_covers_a_trickling_answer() -> None:
    """A server that answers one byte at a time never trips a per-read timeout; the total does."""
    import socket
    import threading

    from memsearch.embeddings.base import ApiErrors
    from memsearch.errors import EmbeddingAPIError
    from memsearch.http import JsonClient

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            until = time.monotonic() + 5  # then hang up, so a client without a deadline fails too
            while not stop.wait(0.1) and time.monotonic() < until:
                try:
                    conn.sendall(b" ")
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/embeddings"
    started = time.monotonic()
    try:
        with pytest.raises(EmbeddingAPIError) as info, JsonClient() as client:
            client.post_json(url, {"input": ["x"]}, headers={}, errors=ApiErrors("Slow"), timeout=1.0)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert 0.9 < time.monotonic() - started < 2.0
    assert str(info.value) == f"The Slow embedding endpoint at {url} did not answer within 1 s."
