"""A damaged Milvus Lite database: named as damaged with the way back, and ``reset`` still works.

The database is a real one built by ``memsearch index``; its files (milvus-lite 3.x keeps a
collection as ``schema.json``, ``manifest.json`` + ``manifest.json.prev``, Parquet segments and
``.idx`` vector indexes under ``collections/<name>/``) are then overwritten with garbage, as a
crash, a full disk or a stray tool could leave them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from memsearch.cli import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memory"
GARBAGE = bytes(range(128, 256)) * 4  # invalid UTF-8, no JSON, no Parquet magic, no .npy header

#: Which files of the collection each case overwrites (globs under collections/memsearch_chunks).
DAMAGE = {
    "schema": ["schema.json"],
    "manifests": ["manifest.json", "manifest.json.prev"],
    "segment": ["partitions/*/data/*.parquet"],
    "vector_index": ["partitions/*/indexes/*.idx"],
    "everything": ["**/*.*"],
}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def snapshot(*roots: Path) -> dict[str, bytes]:
    """Every file under ``roots`` with its content (to show a failing command deleted nothing)."""
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    for f in EXAMPLES.iterdir():
        (root / f.name).write_bytes(f.read_bytes())
    return root


def build(memory: Path, db: Path) -> None:
    r = invoke("index", str(memory), "--provider", "hash", "--milvus-uri", str(db))
    assert r.exit_code == 0 and r.stdout == "Indexed 9 chunks.\n", r.output


def damage(db: Path, case: str) -> list[Path]:
    col = db / "collections" / "memsearch_chunks"
    files = sorted({p for pattern in DAMAGE[case] for p in col.glob(pattern) if p.is_file()})
    assert files, f"milvus-lite no longer keeps {DAMAGE[case]} in {col}: {sorted(col.rglob('*'))}"
    for p in files:
        p.write_bytes(GARBAGE)
    return files


def assert_damaged(result, db: Path) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr  # no engine warning before it
    line = lines[0]
    prefix = f"Error: The Milvus Lite database {db} is damaged: a file in it cannot be read ("
    assert line.startswith(prefix), line
    assert "Hint: The markdown files are the source of truth: run `memsearch reset --yes`" in line, line
    assert f"or delete {db}, then `memsearch index <paths>`" in line, line


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_store_is_named_with_the_way_back(tmp_path: Path, memory: Path, case: str) -> None:
    db = tmp_path / "store.db"
    build(memory, db)
    damage(db, case)
    (memory / "2026-12-01.md").write_text("# 2026-12-01\n\n## 10:00\n\nA new note about backups.\n")
    before = snapshot(db, memory)

    assert_damaged(invoke("search", "file watcher", "--provider", "hash", "--milvus-uri", str(db)), db)
    assert_damaged(invoke("stats", "--milvus-uri", str(db)), db)
    # A changed markdown file makes index open the store (an unchanged tree never does).
    assert_damaged(invoke("index", str(memory), "--provider", "hash", "--milvus-uri", str(db)), db)
    assert_damaged(invoke("index", str(memory), "--force", "--provider", "hash", "--milvus-uri", str(db)), db)
    assert snapshot(db, memory) == before  # failing commands deleted and rewrote nothing

    # The hint is true: reset works on the damaged store, and re-indexing rebuilds it.
    r = invoke("reset", "--yes", "--milvus-uri", str(db))
    assert (r.exit_code, r.stdout, r.stderr) == (0, "Dropped collection.\n", ""), r.output
    assert snapshot(memory) == {k: v for k, v in before.items() if k.startswith(str(memory))}
    r = invoke("index", str(memory), "--provider", "hash", "--milvus-uri", str(db))
    assert (r.exit_code, r.stdout) == (0, "Indexed 10 chunks.\n"), r.output
    r = invoke("search", "backups", "--provider", "hash", "--milvus-uri", str(db), "--json-output")
    assert r.exit_code == 0 and str(memory / "2026-12-01.md") in r.stdout, r.output


def test_reset_of_a_damaged_store_drops_only_its_collection(tmp_path: Path, memory: Path) -> None:
    """Another collection in the same database directory survives the reset of a damaged one."""
    db = tmp_path / "store.db"
    build(memory, db)
    r = invoke("index", str(memory), "--provider", "hash", "--milvus-uri", str(db), "--collection", "other")
    assert r.exit_code == 0, r.output
    damage(db, "schema")
    r = invoke("reset", "--yes", "--milvus-uri", str(db))
    assert r.exit_code == 0, r.output
    assert not (db / "collections" / "memsearch_chunks").exists()
    r = invoke("stats", "--milvus-uri", str(db), "--collection", "other")
    assert (r.exit_code, r.stdout) == (0, "Total indexed chunks: 9\n"), r.output


def test_os_errors_are_not_called_damage(tmp_path: Path, memory: Path) -> None:
    """A read that fails with an OS error (here: the schema is a directory) is not reported as a
    damaged database, so nobody is told to delete an index that is fine."""
    db = tmp_path / "store.db"
    build(memory, db)
    schema = db / "collections" / "memsearch_chunks" / "schema.json"
    schema.unlink()
    schema.mkdir()
    r = invoke("stats", "--milvus-uri", str(db))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "database" not in r.stderr.split("Hint:")[0] and "IsADirectoryError" in r.stderr, r.stderr
    assert os.path.isdir(schema)
