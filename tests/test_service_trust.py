"""Whom the memory service serves, and how it survives what it did not expect (real processes).

A store's owner answers other memsearch processes of the same user; each of them must be served
with its OWN credentials and settings (never the owner's API key), a store deleted under a running
owner must be recovered, and a request that hangs inside the service must neither hang its client
past the timeout nor keep the service from stopping on SIGTERM. Every process is a real
``python -m memsearch`` (or a long-lived program holding a ``MemSearch``); embedding APIs are the
local fake servers of tests/fake_servers.py.
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

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, JsonHandler, fake_api, serving
from memsearch.service.paths import service_paths
from test_service import start_service

__all__ = ["fake_api"]  # the fixture, used by name

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"
#: The OpenAI provider with a model the fake API makes up (8 dimensions).
OPENAI = ("--provider", "openai", "--model", "fake-embed")


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "Hint:" in errors[0] or any(line.lstrip().startswith("Hint") for line in lines), proc.stderr
    return errors[0]


def stop(proc: subprocess.Popen[str], timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    shutil.copytree(EXAMPLES, root)
    return root


# -- whose credentials ---------------------------------------------------------------------------


def keys_seen(api: FakeEmbeddingServer, since: int) -> set[str]:
    return {r.headers.get("authorization", "") for r in api.requests[since:]}


@pytest.fixture
def openai_serve(tmp_path: Path, memory: Path, fake_api: FakeEmbeddingServer) -> Iterator[tuple[str, dict]]:
    """A ``memsearch serve`` with the OpenAI provider whose own key is ``owner-secret``."""
    uri = str(tmp_path / "keys.db")
    common = {"OPENAI_BASE_URL": f"{fake_api.url}/v1"}
    proc = start_service(uri, *OPENAI, env={**common, "OPENAI_API_KEY": "owner-secret"})
    yield uri, common
    assert stop(proc) == 0


def test_a_caller_without_a_key_is_not_served_with_the_owners_key(
    openai_serve: tuple[str, dict], memory: Path, fake_api: FakeEmbeddingServer
) -> None:
    uri, common = openai_serve
    flags = (*OPENAI, "--milvus-uri", uri)
    indexed = memsearch("index", str(memory), *flags, env={**common, "OPENAI_API_KEY": "caller-secret"})
    assert indexed.returncode == 0, indexed.stderr
    since = len(fake_api.requests)
    # No key and no base URL: alone, this caller would be told that OPENAI_API_KEY is missing.
    routed = memsearch("search", "deployment", *flags)
    assert "OPENAI_API_KEY" in one_error_line(routed)
    # No key, the owner's self-hosted API: alone, it would send no key of anybody's.
    keyless = memsearch("search", "deployment", *flags, env=common)
    assert keyless.returncode == 0, keyless.stderr
    assert keys_seen(fake_api, since) == {"Bearer memsearch-no-key"}  # never "owner-secret"


def test_each_caller_is_served_with_its_own_key_and_base_url(
    openai_serve: tuple[str, dict], memory: Path, fake_api: FakeEmbeddingServer
) -> None:
    uri, common = openai_serve
    flags = (*OPENAI, "--milvus-uri", uri)
    since = len(fake_api.requests)
    indexed = memsearch("index", str(memory), *flags, env={**common, "OPENAI_API_KEY": "caller-secret"})
    assert indexed.returncode == 0, indexed.stderr
    assert keys_seen(fake_api, since) == {"Bearer caller-secret"}
    since = len(fake_api.requests)
    found = memsearch("search", "deployment", "-j", *flags, env={**common, "OPENAI_API_KEY": "second-secret"})
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)
    assert keys_seen(fake_api, since) == {"Bearer second-secret"}
    # A caller whose OPENAI_BASE_URL names another API is served through that API, not the owner's.
    with serving(JsonHandler, "elsewhere") as elsewhere:
        moved = memsearch(
            "search", "deployment", *flags, env={"OPENAI_BASE_URL": f"{elsewhere}/v1", "OPENAI_API_KEY": "x"}
        )
    assert "127.0.0.1:" + elsewhere.rsplit(":", 1)[1] in one_error_line(moved)


def test_a_program_owner_serves_a_cli_caller_with_the_callers_key(
    tmp_path: Path, memory: Path, fake_api: FakeEmbeddingServer
) -> None:
    uri = str(tmp_path / "program.db")
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"{fake_api.url}/v1",
        "OPENAI_API_KEY": "program-secret",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    code = (
        "import sys, asyncio\n"
        "from memsearch import MemSearch\n"
        "ms = MemSearch([sys.argv[1]], milvus_uri=sys.argv[2],\n"
        "               embedding_provider='openai', embedding_model='fake-embed')\n"
        "asyncio.run(ms.index())\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "ms.close()\n"
    )
    program = subprocess.Popen(
        [sys.executable, "-c", code, str(memory), uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert program.stdout is not None and program.stdout.readline().strip() == "ready", program.stderr
        since = len(fake_api.requests)
        base = {"OPENAI_BASE_URL": f"{fake_api.url}/v1"}
        routed = memsearch("search", "deployment", *OPENAI, "--milvus-uri", uri)
        assert "OPENAI_API_KEY" in one_error_line(routed)
        keyless = memsearch("search", "deployment", *OPENAI, "--milvus-uri", uri, env=base)
        assert keyless.returncode == 0, keyless.stderr
        assert keys_seen(fake_api, since) == {"Bearer memsearch-no-key"}
        since = len(fake_api.requests)
        mine = memsearch(
            "search", "deployment", *OPENAI, "--milvus-uri", uri,
            env={**base, "OPENAI_API_KEY": "cli-secret"},
        )  # fmt: skip
        assert mine.returncode == 0, mine.stderr
        assert keys_seen(fake_api, since) == {"Bearer cli-secret"}
    finally:
        program.communicate("\n", timeout=60)  # it closes its MemSearch and exits


def test_the_engine_reads_credential_variables_only_through_callerenv() -> None:
    """Closes the class rather than the example: a provider that read ``os.environ`` itself would
    give the owner's value to a caller that has none (checked in the source, as a new provider
    would be written)."""
    src = Path(__file__).resolve().parents[1] / "src" / "memsearch"
    engine_side = [*(src / "embeddings").glob("*.py"), *(src / "http").glob("*.py")]
    engine_side += [src / "jev_reranker.py", src / "reranker.py", src / "core.py"]
    offenders = [
        f"{path.name}: {line.strip()}"
        for path in engine_side
        for line in path.read_text().splitlines()
        if ("os.environ" in line or "os.getenv" in line) and "TQDM_DISABLE" not in line
    ]
    assert offenders == []


# -- the store deleted or replaced under its owner -----------------------------------------------


def test_a_store_deleted_under_a_running_service_is_recreated_by_index(tmp_path: Path, memory: Path) -> None:
    uri = str(tmp_path / "gone.db")
    assert memsearch("index", str(memory), "--milvus-uri", uri).returncode == 0
    proc = start_service(uri)
    try:
        shutil.rmtree(uri)
        # A read says what a read of a missing store says (and creates nothing), not the old rows.
        line = one_error_line(memsearch("search", "deployment", "--milvus-uri", uri))
        assert "No collection" in line and "memsearch index" in line
        assert not Path(uri).exists()
        indexed = memsearch("index", str(memory), "--milvus-uri", uri)
        assert indexed.returncode == 0, indexed.stderr
        assert "Indexed 0 chunks" not in indexed.stdout, indexed.stdout
        found = memsearch("search", "deployment", "-j", "--milvus-uri", uri)
        assert found.returncode == 0 and json.loads(found.stdout), found.stderr
        # The hinted commands work too, after another deletion.
        shutil.rmtree(uri)
        assert memsearch("reset", "--yes", "--milvus-uri", uri).returncode == 0
        forced = memsearch("index", str(memory), "--force", "--milvus-uri", uri)
        assert forced.returncode == 0 and "Indexed 0 chunks" not in forced.stdout, forced.stdout
        assert proc.poll() is None  # the same service, recovered
    finally:
        assert stop(proc) == 0
    # What it wrote is on disk, in the new directory (read without any service).
    stats = memsearch("stats", "--milvus-uri", uri, env={"MEMSEARCH_NO_SERVICE": "1"})
    assert stats.returncode == 0 and "Total indexed chunks: 0" not in stats.stdout, stats.stdout


def test_a_store_replaced_under_a_running_service_is_read_from_its_new_directory(
    tmp_path: Path, memory: Path
) -> None:
    uri, other = str(tmp_path / "swap.db"), str(tmp_path / "other.db")
    only = tmp_path / "only"
    only.mkdir()
    (only / "note.md").write_text("# Lighthouse\n\nThe lighthouse keeper logs the fog horn schedule.\n")
    assert memsearch("index", str(memory), "--milvus-uri", uri).returncode == 0
    assert memsearch("index", str(only), "--milvus-uri", other).returncode == 0
    proc = start_service(uri)
    try:
        shutil.rmtree(uri)
        shutil.copytree(other, uri)
        found = memsearch("search", "fog horn", "-j", "--milvus-uri", uri)
        assert found.returncode == 0, found.stderr
        assert {Path(hit["source"]).name for hit in json.loads(found.stdout)} == {"note.md"}
    finally:
        assert stop(proc) == 0


# -- a request that hangs inside the service -----------------------------------------------------

#: A query the fake Ollama API below accepts and never answers.
HANGING = "lighthouse-hang"


@pytest.fixture
def hanging_ollama() -> Iterator[str]:
    """An Ollama-shaped embedding API on 127.0.0.1 that answers every text but :data:`HANGING`,
    for which it holds the request open without a word (until the test ends)."""
    released = threading.Event()
    state = FakeEmbeddingServer()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if any(HANGING in text for text in body["input"]):
                released.wait(120)
                return
            self._send(200, json.dumps(state.answer(self.path, body)).encode())

    with serving(Handler, "hanging-ollama") as url:
        yield url
        released.set()


def test_a_hung_request_neither_hangs_its_client_nor_others_nor_sigterm(
    tmp_path: Path, memory: Path, hanging_ollama: str
) -> None:
    uri = str(tmp_path / "hang.db")
    flags = ("--provider", "ollama", "--model", "fake-embed", "--milvus-uri", uri)
    env = {"OLLAMA_HOST": hanging_ollama, "MEMSEARCH_SERVICE_TIMEOUT": "2"}
    assert memsearch("index", str(memory), *flags, env=env).returncode == 0
    proc = start_service(uri, *flags[:4], env=env)
    try:
        started = time.monotonic()
        hung = memsearch("search", HANGING, *flags, env=env, timeout=120)
        took = time.monotonic() - started
        line = one_error_line(hung)
        assert f"(pid {proc.pid})" in line and "working on this search" in line, line
        assert took < 30, took  # 6 x MEMSEARCH_SERVICE_TIMEOUT, not the API's 300 s
        # Another search is not blocked behind the hung one (which still hangs in the service).
        other = memsearch("search", "deployment", "-j", *flags, env=env, timeout=60)
        assert other.returncode == 0 and json.loads(other.stdout), other.stderr
        # SIGTERM ends the service promptly, hung request and all.
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        proc.wait(timeout=40)
        assert time.monotonic() - started < 30
        assert not service_paths(uri).socket.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
