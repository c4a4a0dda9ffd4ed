"""Shared test fixtures.

Every test runs with HOME, the working directory and memsearch-related environment variables
isolated, so no test reads or writes the developer's real ``~/.memsearch`` or sees their API keys.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hash_embedder import register as register_hash_embedder

# Fixtures for a real `milvus-lite server` on 127.0.0.1 (tests/ is on sys.path, not a package).
pytest_plugins = ["milvus_server", "fake_llm_server"]

# The deterministic fake embedder, as provider "hash", through the real provider table.
register_hash_embedder()

_ENV_PREFIXES = (
    "MEMSEARCH_",
    "OPENAI_",
    "ANTHROPIC_",
    "GOOGLE_",
    "GEMINI_",
    "VOYAGE_",
    "JINA_",
    "MISTRAL_",
    "OLLAMA_",
    "HF_HUB_OFFLINE",
    # an agent host's shell (the suite run from inside one): memsearch would answer as to a model
    "CLAUDECODE",
    "CODEX_THREAD_ID",
)


#: memsearch's derived caches in ``~/.memsearch``: the optimised ONNX graph and the compact jieba
#: table. Building them costs ~1.6 s in every fresh home, so one real ``memsearch index`` builds them
#: once per run and each test's home gets hard links to them. Both carry checksums
#: (memsearch.models.onnx_cache, memsearch.store.jieba_dict): a test that damaged a linked copy
#: would make later tests rebuild theirs, never use a bad one. Tests of the caches themselves (and
#: of a home that is not a folder) are marked ``fresh_caches`` and start with no ``~/.memsearch`` at all.
_WARM_CACHES = ("onnx-optimized", "cache")


@pytest.fixture(scope="session")
def warm_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run's warm caches. Under pytest-xdist (``make test``) every worker shares the folder of
    the first one to get here: the others wait on a lock, then link the same files."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # not distributed
        return _build_warm_caches(tmp_path_factory.mktemp("warm-home"))
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's own
    with open(shared / "warm-home.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        home = shared / "warm-home"
        if (home / "built").exists():
            return home / ".memsearch"
        shutil.rmtree(home, ignore_errors=True)  # a worker that failed half-way
        home.mkdir()
        caches = _build_warm_caches(home)
        (home / "built").touch()
        return caches


def _build_warm_caches(home: Path) -> Path:
    notes = home / "notes"
    notes.mkdir()
    (notes / "warm.md").write_text("# 缓存\n\n订单导出失败: the caches are warmed once per test run\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", MEMSEARCH_SERVICE_AUTOSTART="0")
    built = subprocess.run(
        [sys.executable, "-m", "memsearch", "index", str(notes)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return home / ".memsearch"


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, warm_caches: Path
) -> Path:
    """A fresh HOME and CWD per test, and no inherited provider keys or memsearch settings."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    if request.node.get_closest_marker("fresh_caches") is None:
        (home / ".memsearch").mkdir(mode=0o700)
        for name in _WARM_CACHES:
            if (warm_caches / name).is_dir():
                shutil.copytree(warm_caches / name, home / ".memsearch" / name, copy_function=os.link)
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # A search would otherwise leave a memory service running for minutes after its test; the
    # tests of that feature (test_service_ondemand.py) turn it back on.
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "0")
    monkeypatch.chdir(work)
    return work


#: The test files of the real-host tests (module-level ``pytestmark = pytest.mark.host``), found by
#: reading them: the pytest-xdist controller that schedules tests does not collect them itself.
HOST_FILES = frozenset(
    f"tests/{path.name}"
    for path in Path(__file__).parent.glob("test_*.py")
    if re.search(r"^pytestmark = .*pytest\.mark\.host\b", path.read_text(encoding="utf-8"), re.MULTILINE)
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every real-host test is in a file of :data:`HOST_FILES` (which ``make test`` schedules as
    one unit, see :func:`pytest_xdist_make_scheduler`)."""
    stray = [
        i.nodeid for i in items if i.get_closest_marker("host") and i.nodeid.split("::")[0] not in HOST_FILES
    ]
    if stray:
        raise pytest.UsageError(
            f"mark the whole module `pytestmark = pytest.mark.host`, not single tests: {stray}"
        )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (``make test``): the real-host tests run one at a time on one worker, as
    in a serial run, scheduled first (the largest unit); every other test is a unit of its own,
    handed to whichever worker is free. Why: each host test drives a CPU-hungry host CLI (node)
    whose own deadlines (Codex's exec gives an MCP server 1 s to start, say) two host CLIs at once on
    two cores would miss. (pytest-xdist 3.8's own ``xdist_group`` marks do not group under pytest 9:
    it renames ``item._nodeid``, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class HostGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.split("::")[0] in HOST_FILES:
                return "host"
            return super()._split_scope(nodeid)

    return HostGroupScheduling(config, log)
