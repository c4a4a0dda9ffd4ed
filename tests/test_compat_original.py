"""Drop-in, measured: the original memsearch 0.4.23 and this package on one Milvus Lite database.

A user who switches tools (either way) keeps the index: every chunk ID the one wrote is the ID the
other computes, so the first ``index`` after the switch embeds nothing; searches find the same
chunks; ``expand`` shows the same text. Both tools run as real CLIs (the original from a side venv
installed from the registry) and embed through one local endpoint serving our packaged model.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.chunker import chunk_markdown
from memsearch.store import MilvusStore
from original_memsearch import MODEL, flags, original_cli, run, serving_packaged_model

pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[1]
OURS = Path(sys.executable).parent / "memsearch"
QUERIES = ["file watcher missed renamed files", "订单导出失败"]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with serving_packaged_model() as url:
        yield url


@pytest.fixture(scope="module")
def original() -> Path:
    return original_cli()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """Hand-written notes and plugin journals (English and Chinese, with and without a final line
    break): what a migrating user has."""
    root = tmp_path / "notes"
    shutil.copytree(ROOT / "examples" / "memory", root)
    shutil.copytree(ROOT / "tests" / "fixtures" / "hooks" / "memory", root / "journal")
    (root / "no-final-newline.md").write_text(
        "# Orders\n\n订单导出失败：CSV 编码错误，改用 UTF-8 BOM。", "utf-8"
    )
    return root


def stored_ids(db: Path, collection: str) -> set[str]:
    with MilvusStore(str(db), collection=collection, dimension=None) as store:
        return {row["chunk_hash"] for row in store.query()}


def our_ids(notes: Path) -> set[str]:
    return {
        chunk.chunk_id(MODEL)
        for path in sorted(notes.rglob("*.md"))
        for chunk in chunk_markdown(path.read_text(encoding="utf-8"), str(path))
    }


def search(cli: Path, query: str, common: list[str]) -> list[str]:
    result = run(cli, "search", query, "--top-k", "5", "--json-output", *common)
    assert result.returncode == 0, result.stderr
    return [hit["chunk_hash"] for hit in json.loads(result.stdout)]


def expand(cli: Path, chunk_hash: str, common: list[str]) -> str:
    result = run(cli, "expand", chunk_hash, *common)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("first", ["original", "ours"])
def test_switching_tools_keeps_the_index(
    first: str, original: Path, endpoint: str, notes: Path, tmp_path: Path
) -> None:
    writer, switcher = (original, OURS) if first == "original" else (OURS, original)
    db = tmp_path / "milvus.db"
    common = flags(endpoint, db, "compat")

    built = run(writer, "index", str(notes), *common)
    assert built.returncode == 0, built.stderr
    written = stored_ids(db, "compat")
    assert written and written == our_ids(notes)  # every chunk: the same ID from both tools

    switched = run(switcher, "index", str(notes), *common)
    assert switched.returncode == 0, switched.stderr
    assert switched.stdout.strip().splitlines()[-1] == "Indexed 0 chunks."  # nothing re-embedded
    assert stored_ids(db, "compat") == written

    for query in QUERIES:
        hits = search(original, query, common)
        assert set(search(OURS, query, common)) == set(hits), query
        for chunk_hash in hits[:1]:
            assert expand(OURS, chunk_hash, common) == expand(original, chunk_hash, common)
