"""Shared test fixtures.

Every test runs with HOME, the working directory and memsearch-related environment variables
isolated, so no test reads or writes the developer's real ``~/.memsearch`` or sees their API keys.
"""

from __future__ import annotations

import os
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


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and CWD per test, and no inherited provider keys or memsearch settings."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
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
