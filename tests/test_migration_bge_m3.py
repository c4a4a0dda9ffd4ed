"""An index the original memsearch built with its default model, opened with our default config.

The original's default onnx model is ``gpahal/bge-m3-onnx-int8`` (1024-d, its graph outputs the
sentence vector as ``dense_vecs``), downloaded into the HuggingFace cache; ours is all-MiniLM-L6-v2
(384-d). The model here is a tiny real ONNX graph with bge-m3's interface (``input_ids`` and
``attention_mask`` in, ``dense_vecs`` (N, 1024) out: a fixed projection of the bag of words), laid
out in the HuggingFace cache under the original's model id, with the word-level tokenizer of the
reranker tests. The "original's index" is a real Milvus Lite collection of dim 1024 whose chunk IDs
carry that model name, written by our indexer with that model chosen and without our manifest, as
the original leaves it. No mocks: the real CLI, store, resolver and onnxruntime.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx  # builds the test graph; a dev dependency
import pytest
from click.testing import CliRunner

from memsearch import MemSearch
from memsearch.cli import cli
from memsearch.engine.migration import ORIGINAL_MODEL
from memsearch.store import MilvusStore
from test_cli_errors import assert_one_error
from test_reranker import VOCAB, write_tokenizer

pytestmark = pytest.mark.model  # our default model is loaded too (a search embeds its query with it)

REVISION = "5e3b9c0d1f2a"
DIMENSION = 1024
MIGRATION_ERROR = (
    ORIGINAL_MODEL,
    "not in the HuggingFace cache",
    "memsearch reset --yes",
    "then `memsearch index <paths>`",
)


def write_bge_m3_like(path: Path) -> None:
    """A graph with bge-m3's ONNX interface: ``dense_vecs`` = (bag of words) @ W, W fixed (V, 1024).

    Padding and unknown words have zero rows, so only the vocabulary's words shape a vector.
    """
    from onnx import TensorProto, helper, numpy_helper

    v = len(VOCAB)
    weights = np.random.default_rng(7).standard_normal((v, DIMENSION)).astype(np.float32)
    weights[VOCAB.index("[PAD]")] = 0.0
    weights[VOCAB.index("[UNK]")] = 0.0
    ints, floats = TensorProto.INT64, TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(n, ints, ["N", "L"]) for n in ("input_ids", "attention_mask")]
    output = helper.make_tensor_value_info("dense_vecs", floats, ["N", DIMENSION])
    consts = [
        helper.make_tensor("depth", ints, [], [v]),
        helper.make_tensor("onehot_values", floats, [2], [0.0, 1.0]),
        helper.make_tensor("axis_last", ints, [1], [-1]),
        helper.make_tensor("axis1", ints, [1], [1]),
        numpy_helper.from_array(weights, "weights"),
    ]
    nodes = [
        helper.make_node("OneHot", ["input_ids", "depth", "onehot_values"], ["onehot"], axis=-1),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=floats),
        helper.make_node("Unsqueeze", ["mask_f", "axis_last"], ["mask3"]),
        helper.make_node("Mul", ["onehot", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["bag"], keepdims=0),
        helper.make_node("MatMul", ["bag", "weights"], ["dense_vecs"]),
    ]
    graph = helper.make_graph(nodes, "tiny-bge-m3", inputs, [output], initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture
def original_model() -> Path:
    """The original's model where it downloaded it: the HuggingFace cache (``$HF_HOME/hub``)."""
    repo = Path(os.environ["HF_HOME"]) / "hub" / ("models--" + ORIGINAL_MODEL.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    write_bge_m3_like(snapshot / "model_quantized.onnx")  # the file name the original fetches first
    write_tokenizer(snapshot / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return repo


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "db.md").write_text("# Incident\n\nThe milvus database timeout came back after the upgrade.\n")
    (root / "food.md").write_text("# Dinner\n\nA pasta recipe: cooking takes ten minutes.\n")
    return root


@pytest.fixture
async def original_index(tmp_path: Path, notes: Path, original_model: Path) -> Path:
    """A Milvus Lite database holding the original's 1024-d index of ``notes`` (no manifest of ours)."""
    db = tmp_path / "milvus.db"
    ms = MemSearch([notes], embedding_model=ORIGINAL_MODEL, milvus_uri=str(db), embedding_cache=False)
    assert await ms.index() == 2
    assert ms.store.dimension == DIMENSION
    ms.forget_manifest()
    ms.close()
    return db


def stored_ids(db: Path) -> set[str]:
    with MilvusStore(str(db), dimension=None) as store:
        return {str(row["chunk_hash"]) for row in store.query()}


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_default_config_searches_and_indexes_the_originals_index(
    original_index: Path, notes: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = stored_ids(original_index)
    uri = ["--milvus-uri", str(original_index)]
    with caplog.at_level(logging.WARNING, logger="memsearch"):
        r = cli_run("search", "milvus timeout", "--json-output", *uri)
    assert r.exit_code == 0, r.output
    hits = json.loads(r.stdout)
    assert hits and hits[0]["source"] == str(notes / "db.md")
    assert {h["chunk_hash"] for h in hits} <= before
    said = [rec.getMessage() for rec in caplog.records if "original memsearch's bge-m3" in rec.getMessage()]
    assert len(said) == 1 and ORIGINAL_MODEL in said[0] and "1024-d" in said[0]

    r = cli_run("index", str(notes), *uri)
    assert r.exit_code == 0, r.output
    assert r.stdout == "Indexed 0 chunks.\n"  # same chunk IDs (model name included): nothing re-embedded
    assert stored_ids(original_index) == before
    assert cli_run("index", str(notes), *uri).stdout == "Indexed 0 chunks.\n"

    # An edited file is embedded with the original's model, into the same 1024-d collection.
    (notes / "food.md").write_text("# Dinner\n\nA pasta recipe and a milvus database.\n")
    r = cli_run("index", str(notes), *uri)
    assert r.stdout == "Indexed 1 chunk.\n", r.output
    with MilvusStore(str(original_index), dimension=None) as store:
        assert store.dimension == DIMENSION and store.count() == 2


async def test_python_api_with_no_model_chosen(original_index: Path, notes: Path) -> None:
    ms = MemSearch([notes], milvus_uri=str(original_index))
    report = await ms.index_with_report()
    assert report.indexed_chunks == 0 and ms.model_name == ORIGINAL_MODEL
    hits = await ms.search("pasta recipe", top_k=1)
    assert hits[0]["source"] == str(notes / "food.md")
    ms.close()

    # The next run remembers the model: an unchanged folder opens neither Milvus nor a model.
    again = MemSearch([notes], milvus_uri=str(original_index))
    report = await again.index_with_report()
    assert report.unchanged and again._store is None and again._embedder is None
    assert again.model_name == ORIGINAL_MODEL


def test_the_message_is_on_stderr_of_a_real_process(original_index: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "search", "milvus timeout", "--milvus-uri", str(original_index)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "milvus database timeout" in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "using the original memsearch's bge-m3 model" in lines[0], proc.stderr


def test_without_the_model_in_the_cache_one_clear_error(
    original_index: Path, original_model: Path, notes: Path
) -> None:
    shutil.rmtree(original_model)
    before = stored_ids(original_index)
    uri = ["--milvus-uri", str(original_index)]
    line = assert_one_error(cli_run("search", "milvus timeout", *uri), *MIGRATION_ERROR)
    assert str(original_model) in line and "dim=1024" in line
    assert_one_error(cli_run("index", str(notes), *uri), *MIGRATION_ERROR)
    assert stored_ids(original_index) == before


@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_chosen_model_still_gets_the_dimension_mismatch(
    original_index: Path, notes: Path, how: str
) -> None:
    uri = ["--milvus-uri", str(original_index)]
    chosen: list[str] = []
    if how == "flag":
        chosen = ["--model", "all-MiniLM-L6-v2"]
    else:
        config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text('[embedding]\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\n')
    for args in (["search", "milvus timeout"], ["index", str(notes)]):
        line = assert_one_error(cli_run(*args, *uri, *chosen), "Embedding dimension mismatch", "dim=1024")
        assert ORIGINAL_MODEL not in line
