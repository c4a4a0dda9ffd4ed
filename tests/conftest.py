"""Shared test fixtures.

Every test runs with HOME, the working directory and memsearch-related environment variables
isolated, so no test reads or writes the developer's real ``~/.memsearch`` or sees their API keys.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
)


#: memsearch's derived caches in ``~/.memsearch``: the optimised ONNX graph and the compact jieba
#: table. Building them costs ~1.6 s in every fresh home, so one real ``memsearch index`` builds them
#: once per run and each test's home gets hard links to them. Both carry checksums
#: (memsearch.onnx_cache, memsearch.jieba_dict): a test that damaged a linked copy would make later
#: tests rebuild theirs, never use a bad one. Tests of the caches themselves (and of a home that is
#: not a folder) are marked ``fresh_caches`` and start with no ``~/.memsearch`` at all.
_WARM_CACHES = ("onnx-optimized", "cache")


@pytest.fixture(scope="session")
def warm_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("warm-home")
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
