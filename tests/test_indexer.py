"""Incremental indexing through the public API, on a real Milvus Lite and the hash embedder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from hash_embedder import DEFAULT_MODEL, HashEmbedder
from memsearch import MemSearch
from memsearch.embeddings import ProviderSpec, register_provider
from memsearch.engine.lifecycle import ModelLifecycle
from memsearch.errors import EmbeddingError

REFERENCE_KEYS = [
    "content",
    "source",
    "heading",
    "chunk_hash",
    "heading_level",
    "start_line",
    "end_line",
    "score",
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    write(root / "db.md", "# Database\n\nThe connection pool timed out under load.\n")
    write(root / "deploy.md", "# Deploy\n\nBlue/green deploys switch nginx upstreams.\n")
    write(root / "sub" / "cache.md", "# Cache\n\nRedis keys expire after ten minutes.\n")
    return root


def make(paths: list[Path], tmp_path: Path, **kw: object) -> MemSearch:
    settings: dict[str, object] = {"embedding_provider": "hash", "milvus_uri": str(tmp_path / "m.db"), **kw}
    return MemSearch([str(p) for p in paths], **settings)  # type: ignore[arg-type]


async def test_index_then_search_returns_reference_keys(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        assert await ms.index() == 3
        hits = await ms.search("connection pool timed out", top_k=2)
    assert hits and list(hits[0]) == [*REFERENCE_KEYS, "relevance"]  # the original's keys, then ours
    assert hits[0]["source"] == str(notes / "db.md")
    assert hits[0]["heading"] == "Database" and hits[0]["heading_level"] == 1
    assert 0 < hits[0]["score"] <= 1.0
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


async def test_unchanged_tree_opens_neither_store_nor_model(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
    with make([notes], tmp_path) as ms:
        report = await ms.index_with_report()
        assert report.unchanged and report.indexed_chunks == 0 and report.total_files == 3
        assert ms._store is None and ms._embedder is None


async def test_touched_but_identical_file_embeds_nothing(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
    later = (notes / "db.md").stat().st_mtime + 10
    os.utime(notes / "db.md", (later, later))
    with make([notes], tmp_path) as ms:
        report = await ms.index_with_report()
        assert report.indexed_chunks == 0 and not report.unchanged
    with make([notes], tmp_path) as ms:
        assert (await ms.index_with_report()).unchanged


async def test_edit_replaces_only_that_files_chunks(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
    write(notes / "db.md", "# Database\n\nWe moved to PgBouncer in transaction mode.\n")
    with make([notes], tmp_path) as ms:
        report = await ms.index_with_report()
        assert report.indexed_chunks == 1 and report.changed_files == 1
        assert report.deleted_chunks == 1
        assert ms.count() == 3
        contents = [h["content"] for h in await ms.search("database", top_k=10)]
    assert not any("timed out" in c for c in contents)
    assert any("PgBouncer" in c for c in contents)


async def test_deleted_file_is_pruned_only_under_directory_roots(notes: Path, tmp_path: Path) -> None:
    other = write(tmp_path / "notes2" / "x.md", "# Other\n\nSomething in a sibling folder.\n")
    with make([notes, other], tmp_path) as ms:
        await ms.index()
        assert ms.count() == 4
    (notes / "deploy.md").unlink()
    with make([notes], tmp_path) as ms:  # notes2 is not a root this time: keep it
        report = await ms.index_with_report()
        assert report.removed_files == 1
        sources = {h["source"] for h in await ms.search("something", top_k=10)}
    assert str(other) in sources and str(notes / "deploy.md") not in sources


async def test_explicit_file_index_never_prunes_others(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
    with make([notes / "db.md"], tmp_path) as ms:
        await ms.index_with_report(force=True)
        assert ms.count() == 3


async def test_force_reembeds_everything(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
        assert await ms.index(force=True) == 3
        assert ms.count() == 3


async def test_reset_and_deleted_database_trigger_full_reindex(notes: Path, tmp_path: Path) -> None:
    with make([notes], tmp_path) as ms:
        await ms.index()
        ms.reset()
    with make([notes], tmp_path) as ms:
        assert await ms.index() == 3
    shutil.rmtree(tmp_path / "m.db")
    with make([notes], tmp_path) as ms:
        assert await ms.index() == 3


async def test_bad_files_are_reported_and_do_not_stop_others(notes: Path, tmp_path: Path) -> None:
    (notes / "binary.md").write_bytes(b"\x00\x01\x02PNG\x00" * 50)
    (notes / "latin1.md").write_bytes("# Caf\xe9\n\nna\xefve text about caching\n".encode("latin-1"))
    with make([notes], tmp_path) as ms:
        report = await ms.index_with_report()
        assert report.status == "degraded"
        assert [f.path for f in report.failed_files] == [str(notes / "binary.md")]
        assert "binary" in report.failed_files[0].error
        assert any("latin1.md" in w and "byte" in w for w in report.warnings)
        assert ms.count() == 4  # three good files + the repaired latin-1 one
        hits = await ms.search("caching", top_k=5)
    assert any("\ufffd" in h["content"] for h in hits if h["source"].endswith("latin1.md"))
    # the failed file is retried next time (not recorded as indexed)
    with make([notes], tmp_path) as ms:
        assert (await ms.index_with_report()).status == "degraded"


async def test_source_prefix_matches_path_boundaries(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "a.md", "# A\n\nshared keyword alpha\n")
    write(tmp_path / "docs2" / "b.md", "# B\n\nshared keyword alpha\n")
    with make([tmp_path / "docs", tmp_path / "docs2"], tmp_path) as ms:
        await ms.index()
        hits = await ms.search("alpha", top_k=5, source_prefix=str(tmp_path / "docs"))
        assert {h["source"] for h in hits} == {str(tmp_path / "docs" / "a.md")}
        quoted = await ms.search('alpha" or source != "', top_k=5, source_prefix='x" or source != "')
        assert quoted == []


async def test_index_file_indexes_one_file(notes: Path, tmp_path: Path) -> None:
    extra = write(tmp_path / "loose.md", "# Loose\n\nA note outside the roots.\n")
    with make([notes], tmp_path) as ms:
        assert await ms.index_file(extra) == 1
        assert ms.count() == 1


async def test_chunk_ids_follow_the_reference_formula(notes: Path, tmp_path: Path) -> None:
    from memsearch.chunker import chunk_markdown, compute_chunk_id

    with make([notes / "db.md"], tmp_path) as ms:
        await ms.index()
        hit = (await ms.search("pool", top_k=1))[0]
    text = (notes / "db.md").read_text()
    (chunk,) = chunk_markdown(text, str(notes / "db.md"))
    # The reference's range for a file's last section ends at len(text.split("\n")): one past the
    # last line when the file ends with a line break.
    expected = compute_chunk_id(
        str(notes / "db.md"), chunk.start_line, len(text.split("\n")), chunk.content_hash, "hash-64"
    )
    assert hit["chunk_hash"] == expected


class _FailingAfter(HashEmbedder):
    """The hash embedder (same model name, so the same chunk IDs) failing from its Nth batch on."""

    provider_name = "hash-failing"
    fail_from: ClassVar[int | None] = None

    async def _embed_batch(self, conn: object, texts: list[str], *, query: bool) -> list[list[float]]:
        if self.fail_from is not None and self.calls >= self.fail_from:
            raise EmbeddingError("the embedding service went away")
        return await super()._embed_batch(conn, texts, query=query)


async def test_embedding_failure_mid_run_keeps_what_was_stored_and_retries_the_rest(tmp_path: Path) -> None:
    """Batches upserted while the next one embeds are kept; unfinished files are retried next run."""
    register_provider(
        ProviderSpec("hash-failing", _FailingAfter, DEFAULT_MODEL, None, frozenset({"model", "batch_size"}))
    )
    root = tmp_path / "many"
    for n in range(12):  # 12 files x 20 sections = 240 chunks: four upsert steps of 64
        text = "".join(f"## S{n}-{k}\n\ntopic {n} item {k} word{n}x{k}\n\n" for k in range(20))
        write(root / f"f{n:02}.md", text)
    _FailingAfter.fail_from = 9  # batches of 16: steps 1-2 embed, step 3 fails part-way
    try:
        with make([root], tmp_path, embedding_provider="hash-failing") as ms:
            with pytest.raises(EmbeddingError, match="went away"):
                await ms.index()
            stored = ms.count()
        assert stored == 128  # both finished steps are in, nothing of the failed one
        _FailingAfter.fail_from = None
        with make([root], tmp_path, embedding_provider="hash-failing") as ms:
            report = await ms.index_with_report()
            assert ms.count() == 240
            # files completed before the failure were recorded and are not embedded again
            assert 0 < report.indexed_chunks < 240
            assert report.changed_files < 12
            hits = await ms.search("word0x3", top_k=5)
        assert "S0-3" in [h["heading"] for h in hits]
    finally:
        _FailingAfter.fail_from = None


class _WarmFails(HashEmbedder):
    """A provider whose background model load fails (a broken local model, say)."""

    provider_name = "hash-warm-fails"
    warmed = 0

    def warm(self) -> None:
        type(self).warmed += 1
        raise EmbeddingError("model files are damaged")


async def test_model_warm_up_runs_beside_the_store_and_never_fails_a_run_itself(tmp_path: Path) -> None:
    """The indexer loads a local model while the store opens, only when files changed; a failed
    warm-up is left to the embedding that needs the model (here it works), never raised itself."""
    register_provider(
        ProviderSpec("hash-warm-fails", _WarmFails, DEFAULT_MODEL, None, frozenset({"model", "batch_size"}))
    )
    root = tmp_path / "notes"
    note = write(root / "a.md", "# A\n\nalpha beta\n")
    with make([root], tmp_path, embedding_provider="hash-warm-fails") as ms:
        assert await ms.index() == 1
        assert _WarmFails.warmed == 1
        assert await ms.index() == 0  # unchanged: the model is not even warmed
        assert _WarmFails.warmed == 1
        note.write_text("# A\n\nalpha gamma\n", encoding="utf-8")
        report = await ms.index_with_report()
        assert (report.indexed_chunks, report.changed_files, report.status) == (1, 1, "ok")
        assert _WarmFails.warmed == 2
        assert [h["content"] for h in await ms.search("gamma", top_k=1)] == ["# A\n\nalpha gamma"]


class _Releases(HashEmbedder):
    """Records each batch it embeds and each time it is told to drop its model; with ``store`` set,
    also whether that Lite database existed when each document batch was embedded."""

    events: ClassVar[list[str]] = []
    store: ClassVar[Path | None] = None
    store_existed: ClassVar[list[bool]] = []

    async def _embed_batch(self, conn: object, texts: list[str], *, query: bool) -> list[list[float]]:
        _Releases.events.append(f"{'query' if query else 'embed'} {len(texts)}")
        if _Releases.store is not None and not query:
            _Releases.store_existed.append(_Releases.store.exists())
        return await super()._embed_batch(conn, texts, query=query)

    def release_model(self) -> None:
        _Releases.events.append("release")


@pytest.fixture
def releases() -> list[str]:
    register_provider(
        ProviderSpec("hash-releases", _Releases, DEFAULT_MODEL, None, frozenset({"model", "batch_size"}))
    )
    _Releases.events.clear()
    _Releases.store = None
    _Releases.store_existed.clear()
    return _Releases.events


async def test_a_one_shot_run_embeds_a_small_change_before_the_store_and_drops_the_model(
    notes: Path, tmp_path: Path, releases: list[str]
) -> None:
    """``ModelLifecycle.ONE_SHOT`` (one CLI index or search): a small change is embedded into the
    embedding cache before the store opens and the model dropped, so the upsert takes the vector
    from the cache; a search drops the model once the query is embedded. A library user's
    instance (the default) keeps its model."""
    with make([notes], tmp_path, embedding_provider="hash-releases") as ms:
        assert await ms.index() == 3
        await ms.search("pool", top_k=1)
    assert releases == ["embed 3", "query 1"]  # kept: never released

    releases.clear()
    write(notes / "db.md", "# Database\n\nThe connection pool was resized to forty.\n")
    with make(
        [notes], tmp_path, embedding_provider="hash-releases", model_lifecycle=ModelLifecycle.ONE_SHOT
    ) as ms:
        report = await ms.index_with_report()
        from_cache = ms.embedder.hits  # type: ignore[attr-defined]
        hits = await ms.search("resized pool", top_k=1)
    assert report.indexed_chunks == 1
    assert from_cache >= 1  # the upsert's vector came from the cache the ahead step filled
    assert releases == ["embed 1", "release", "query 1", "release"]
    assert "forty" in hits[0]["content"]


async def test_a_one_shot_first_index_embeds_everything_before_the_store_exists(
    tmp_path: Path, releases: list[str]
) -> None:
    """``ONE_SHOT`` (``memsearch index``), 150 notes into a new Lite file: every text is embedded
    into the cache, a step at a time, before the store is even created (the model's memory and
    Milvus Lite's are never held together), the model is dropped once, the progress counts the
    embedding once from 0 to 150, and every upsert takes its vector from the cache."""
    root = tmp_path / "notes"
    for i in range(150):
        write(root / f"n{i:03}.md", f"# Note {i}\n\nfact number {i} about topic{i}\n")
    _Releases.store = tmp_path / "m.db"
    ticks: list[tuple[int, int]] = []
    with make(
        [root], tmp_path, embedding_provider="hash-releases", model_lifecycle=ModelLifecycle.ONE_SHOT
    ) as ms:
        report = await ms.index_with_report(progress=lambda done, total: ticks.append((done, total)))
        from_cache = ms.embedder.hits  # type: ignore[attr-defined]
        hits = await ms.search("topic42", top_k=3)
    assert report.indexed_chunks == 150 and report.embed_seconds > 0
    assert _Releases.store_existed and not any(_Releases.store_existed)
    assert releases.index("release") == len(releases) - 3  # released once, before the search
    assert sum(int(e.split()[1]) for e in releases if e.startswith("embed")) == 150
    assert ticks[0] == (0, 150) and ticks[-1] == (150, 150)
    assert [done for done, _ in ticks] == sorted(done for done, _ in ticks) and len(ticks) == 4
    assert from_cache == 150
    assert any(h["content"].endswith("about topic42") for h in hits)


async def test_a_program_keeps_embedding_beside_the_store(tmp_path: Path, releases: list[str]) -> None:
    """A program's ``MemSearch`` keeps its model (``KEEP``): its runs stay pipelined, the store's
    work beside the embedding, nothing embedded ahead and the model never dropped."""
    root = tmp_path / "notes"
    for i in range(70):
        write(root / f"n{i:02}.md", f"# Note {i}\n\nfact number {i} about topic{i}\n")
    _Releases.store = tmp_path / "m.db"
    with make([root], tmp_path, embedding_provider="hash-releases") as ms:
        assert await ms.index() == 70
        assert ms.embedder.hits == 0  # type: ignore[attr-defined]  # nothing embedded ahead
    assert "release" not in releases and all(_Releases.store_existed)
    assert sum(int(e.split()[1]) for e in releases if e.startswith("embed")) == 70


def _twin_notes(root: Path, sections: int) -> None:
    """Two files with the same ``sections`` sections: every chunk text is there twice."""
    body = "".join(
        f"## Topic {i}\n\nFact {i}: the deploy pipeline runs stage {i} before {i + 1}.\n\n"
        for i in range(sections)
    )
    write(root / "a.md", "# Shared notes\n\n" + body)
    write(root / "b.md", "# Shared notes\n\n" + body)


async def test_a_chunk_text_twice_in_a_run_is_embedded_once(tmp_path: Path) -> None:
    """The real default provider and the embedding cache: 80 chunks, 40 texts; the duplicates in
    the same step (64 chunks) and in the next step never reach the model (the cache's counters)."""
    _twin_notes(tmp_path / "notes", 40)
    with MemSearch([str(tmp_path / "notes")], milvus_uri=str(tmp_path / "m.db")) as ms:
        report = await ms.index_with_report()
        assert report.indexed_chunks == 80
        assert (ms._embedder.misses, ms._embedder.hits) == (40, 40)
        assert report.embed_seconds > 0


async def test_without_the_cache_a_step_embeds_each_text_once(tmp_path: Path) -> None:
    _twin_notes(tmp_path / "notes", 10)
    with make([tmp_path / "notes"], tmp_path, embedding_cache=False) as ms:
        assert await ms.index() == 20
        embedder = ms._embedder
        assert isinstance(embedder, HashEmbedder)
        assert sorted(embedder.embedded) == sorted(set(embedder.embedded)) and len(embedder.embedded) == 10
        hits = await ms.search("stage 3 before 4", top_k=4)
    assert {h["source"] for h in hits[:2]} == {
        str(tmp_path / "notes" / "a.md"),
        str(tmp_path / "notes" / "b.md"),
    }
