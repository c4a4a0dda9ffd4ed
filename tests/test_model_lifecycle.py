"""One model-lifecycle policy (``memsearch.engine.lifecycle.ModelLifecycle``), measured on real processes.

The memory service keeps its model warm between requests and lets it go once nobody has asked for
``MEMSEARCH_MODEL_IDLE_SECONDS``; the next search loads it again and answers the same. (A one-shot
command dropping its model before the store's flush: ``tests/test_indexer.py``.)
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.config import MemSearchConfig
from memsearch.core import engine
from memsearch.engine.lifecycle import DEFAULT_MODEL_IDLE_SECONDS, ModelLifecycle, model_idle_seconds
from memsearch.engine.memory import open_memory
from test_service import EXAMPLES, proc_status, search_json, start_service

pytestmark = pytest.mark.model

MB = 1024  # VmRSS is in kB


@pytest.fixture
def indexed(tmp_path: Path) -> str:
    root = tmp_path / "memory"
    shutil.copytree(EXAMPLES, root)
    uri = str(tmp_path / "svc.db")
    proc = memsearch("index", str(root), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return uri


def rss_after(pid: int, settle: float = 1.0) -> int:
    time.sleep(settle)
    return proc_status(pid, "VmRSS")


def test_the_service_lets_an_idle_model_go_and_loads_it_again_on_the_next_search(indexed: str) -> None:
    uri = indexed
    proc = start_service(uri, env={"MEMSEARCH_MODEL_IDLE_SECONDS": "4"})
    try:
        first = search_json(uri, "database connection timeout")
        warm = rss_after(proc.pid, 0.2)
        deadline = time.monotonic() + 30
        idle = warm
        while time.monotonic() < deadline and idle > warm - 30 * MB:
            idle = rss_after(proc.pid)
        assert idle <= warm - 30 * MB, (warm, idle)  # the model's ~80 MB went back
        again = search_json(uri, "database connection timeout")
        loaded = rss_after(proc.pid, 0.2)
        assert again == first  # reloaded, same answer
        assert loaded >= idle + 30 * MB, (idle, loaded)
        print(f"service VmRSS: warm {warm // MB} MB, idle {idle // MB} MB, searched again {loaded // MB} MB")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_a_busy_service_keeps_its_model(indexed: str) -> None:
    """Searches closer together than the idle limit never pay a reload."""
    proc = start_service(indexed, env={"MEMSEARCH_MODEL_IDLE_SECONDS": "6"})
    try:
        search_json(indexed, "database connection timeout")
        warm = rss_after(proc.pid, 0.2)
        for _ in range(4):
            time.sleep(2)
            search_json(indexed, "blue green deployment rollback")
        assert rss_after(proc.pid, 0.2) > warm - 30 * MB
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_the_policy_is_one_choice_per_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ModelLifecycle.ONE_SHOT.drops_after_use
    assert not ModelLifecycle.KEEP.drops_after_use and not ModelLifecycle.IDLE.drops_after_use
    assert MemSearch()._lifecycle is ModelLifecycle.KEEP  # a program's
    assert engine([])._lifecycle is ModelLifecycle.IDLE  # the memory service's
    with open_memory(MemSearchConfig()) as memory:  # a command's, a hook's
        assert memory._ms._lifecycle is ModelLifecycle.ONE_SHOT
    monkeypatch.delenv("MEMSEARCH_MODEL_IDLE_SECONDS", raising=False)
    assert model_idle_seconds() == DEFAULT_MODEL_IDLE_SECONDS
    monkeypatch.setenv("MEMSEARCH_MODEL_IDLE_SECONDS", "2.5")
    assert model_idle_seconds() == 2.5
