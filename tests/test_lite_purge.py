"""``MilvusStore.purge``: deleted rows leave Milvus Lite's files (and a server is asked to compact).

Milvus Lite deletes by tombstone and keeps a deleted row in its Parquet data file until its own
compaction, which a small store never reaches. Checked on a real Lite database with two data files:
the deleted rows' text is in the files (read back decoded, and as bytes) before the purge and in
none after it; the rows that stay answer the same vector searches (BM25 scores may move: its
statistics no longer count the dead rows, as after Milvus Lite's own compaction) and are all found
by their words; a second purge has nothing to do;
another process opens the database and finds the same rows.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memsearch.store import MilvusStore

DIM = 8


def _row(n: int, content: str) -> dict[str, object]:
    vector = [((n * 7 + i * 3) % 11 + 1) / 11 + (i == n % DIM) for i in range(DIM)]  # no two alike
    return {
        "chunk_hash": f"{n:016x}",
        "embedding": vector,
        "content": content,
        "source": f"/notes/{n}.md",
        "heading": "Heading",
        "heading_level": 2,
        "start_line": 1,
        "end_line": 3,
    }


def _decoded_rows_holding(db: Path, needle: str) -> int:
    import pyarrow.parquet as pq

    return sum(
        any(needle in str(v) for v in row.values())
        for path in db.rglob("*.parquet")
        for row in pq.read_table(path).to_pylist()
    )


def _bytes_holding(db: Path, needle: str) -> list[Path]:
    return [p for p in db.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_purge_rewrites_the_files_that_hold_deleted_rows(tmp_path: Path) -> None:
    db = tmp_path / "purge.db"
    secrets = ["Qz7RwL9mTk2Vx", "Hn4PbW8cJs6Ye"]
    with MilvusStore(str(db), dimension=DIM) as store:
        store.upsert([_row(n, f"plain note number {n} about gardening") for n in range(6)])
        store.upsert([_row(6, f"the staging password is {secrets[0]}")])
        store.flush()  # a first data file
        store.upsert([_row(n, f"another note {n} about kubernetes ingress") for n in range(7, 12)])
        store.upsert([_row(12, f"the deploy token is {secrets[1]}")])
        store.flush()  # a second one
        store.delete_by_hashes([f"{6:016x}", f"{12:016x}"])
        store.flush()
        queries = [[1.0 if i == k else 0.0 for i in range(DIM)] for k in range(DIM)]
        before = [store.search(q, top_k=5, mode="dense") for q in queries]
        for secret in secrets:  # deleted, but still in the files: what the purge is for
            assert _decoded_rows_holding(db, secret) == 1 and _bytes_holding(db, secret)

        assert store.purge() == {"purged": 1, "files": 2, "rows": 2}
        for secret in secrets:
            assert _decoded_rows_holding(db, secret) == 0 and _bytes_holding(db, secret) == []
        assert store.count() == 11
        assert [store.search(q, top_k=5, mode="dense") for q in queries] == before
        words = store.search(queries[0], query_text="kubernetes ingress", top_k=20, mode="sparse")
        assert sorted(h["chunk_hash"] for h in words) == [f"{n:016x}" for n in range(7, 12)]
        assert store.purge() == {"purged": 1, "files": 0, "rows": 0}  # nothing left to do
    reopened = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from memsearch.store import MilvusStore\n"
            f"with MilvusStore({str(db)!r}, dimension=None) as s: print(s.count())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reopened.returncode == 0, reopened.stderr
    assert reopened.stdout.strip() == "11"


def test_purge_of_a_store_with_no_collection_does_nothing(tmp_path: Path) -> None:
    with MilvusStore(str(tmp_path / "none.db"), dimension=None, create=False) as store:
        assert store.purge() == {}
    assert not (tmp_path / "none.db").exists()


@pytest.mark.server
def test_purge_on_a_server_asks_it_to_compact(milvus_server_uri: str) -> None:
    collection = f"t_{uuid.uuid4().hex[:12]}"
    with MilvusStore(milvus_server_uri, collection=collection, dimension=DIM) as store:
        try:
            store.upsert([_row(n, f"note {n}") for n in range(3)])
            store.delete_by_hashes([f"{0:016x}"])
            assert store.purge() == {"purged": 0, "files": 0, "rows": 0, "requested": 1}
            assert store.count() == 2
        finally:
            store.drop()
