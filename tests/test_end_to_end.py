"""The README's main job as real processes: the default ONNX model, Milvus Lite and a Milvus server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_process import memsearch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"


def top_sources(uri: str, query: str, k: int = 3) -> list[str]:
    proc = memsearch("search", query, "--json-output", "--top-k", str(k), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return [Path(h["source"]).name for h in json.loads(proc.stdout)]


@pytest.mark.model
def test_default_model_offline_on_milvus_lite(tmp_path: Path) -> None:
    uri = str(tmp_path / "lite.db")
    proc = memsearch("index", str(EXAMPLES), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Indexed 9 chunks.\n"
    assert proc.stderr == ""

    assert top_sources(uri, "database connection timeout")[0] == "2026-11-02.md"
    assert top_sources(uri, "blue green deployment rollback")[0] == "decisions.md"
    # Chinese queries find the Chinese journal; English ones stay on English text.
    assert top_sources(uri, "订单导出失败", k=1) == ["2026-11-04.md"]
    assert top_sources(uri, "缓存过期时间", k=1) == ["2026-11-04.md"]
    assert "2026-11-04.md" not in top_sources(uri, "webpack vite build time", k=2)

    again = memsearch("index", str(EXAMPLES), "--milvus-uri", uri)
    assert again.stdout == "Indexed 0 chunks.\n"


@pytest.mark.server
@pytest.mark.model
def test_default_model_on_a_milvus_server(milvus_server_uri: str) -> None:
    collection = "e2e_server"
    proc = memsearch("index", str(EXAMPLES), "--milvus-uri", milvus_server_uri, "--collection", collection)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Indexed 9 chunks.\n"
    out = memsearch(
        "search",
        "订单导出失败",
        "-j",
        "-k",
        "1",
        "--milvus-uri",
        milvus_server_uri,
        "--collection",
        collection,
    )
    assert out.returncode == 0, out.stderr
    assert Path(json.loads(out.stdout)[0]["source"]).name == "2026-11-04.md"
    stats = memsearch("stats", "--milvus-uri", milvus_server_uri, "--collection", collection)
    assert stats.stdout == "Total indexed chunks: 9\n"
    memsearch("reset", "--yes", "--milvus-uri", milvus_server_uri, "--collection", collection)
