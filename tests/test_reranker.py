"""The cross-encoder stage, run for real by onnxruntime on a tiny cross-encoder built here.

No package on PyPI ships a small cross-encoder as ONNX that installs offline, so the tests build
one with onnx's helper API: a word-level tokenizer (``[CLS] query [SEP] passage [SEP]`` with type
ids 0/1, as BERT cross-encoders have) and a graph that scores a pair by how many distinct query
words appear in the passage: ``logit = 2 * overlap - 1``. It has the inputs and output shape of a
real ms-marco cross-encoder, so everything except the learned weights is the production path:
file resolution, tokenising pairs, padding, onnxruntime, sigmoid, sorting, truncation.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import onnx  # builds the test graph; a dev dependency
import pytest

from memsearch import MemSearch, reranker
from memsearch.errors import ModelNotFoundError
from memsearch.reranker import CrossEncoderReranker, PackagedReranker, _probabilities, rerank

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "milvus", "database", "timeout", "cooking", "recipe", "pasta"]
SPECIAL = 4  # ids below this are special tokens and never count as overlap


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    tok.save(str(path))


def write_cross_encoder(path: Path) -> None:
    """A graph with BERT cross-encoder inputs and a (N, 1) logit: 2 * |query words in passage| - 1."""
    from onnx import TensorProto, helper

    v = len(VOCAB)
    ints = TensorProto.INT64
    floats = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info(n, ints, ["N", "L"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", floats, ["N", 1])
    consts = [
        helper.make_tensor("depth", ints, [], [v]),
        helper.make_tensor("onehot_values", floats, [2], [0.0, 1.0]),
        helper.make_tensor("one", floats, [], [1.0]),
        helper.make_tensor("two", floats, [], [2.0]),
        helper.make_tensor("axis1", ints, [1], [1]),
        helper.make_tensor("axis_last", ints, [1], [-1]),
        helper.make_tensor("content", floats, [v], [0.0] * SPECIAL + [1.0] * (v - SPECIAL)),
    ]
    nodes = [
        helper.make_node("OneHot", ["input_ids", "depth", "onehot_values"], ["onehot"], axis=-1),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=floats),
        helper.make_node("Cast", ["token_type_ids"], ["type_f"], to=floats),
        helper.make_node("Sub", ["one", "type_f"], ["not_type"]),
        helper.make_node("Mul", ["mask_f", "not_type"], ["q_w"]),
        helper.make_node("Mul", ["mask_f", "type_f"], ["d_w"]),
        helper.make_node("Unsqueeze", ["q_w", "axis_last"], ["q_w3"]),
        helper.make_node("Unsqueeze", ["d_w", "axis_last"], ["d_w3"]),
        helper.make_node("Mul", ["onehot", "q_w3"], ["q_hot"]),
        helper.make_node("Mul", ["onehot", "d_w3"], ["d_hot"]),
        helper.make_node("ReduceSum", ["q_hot", "axis1"], ["q_count"], keepdims=0),
        helper.make_node("ReduceSum", ["d_hot", "axis1"], ["d_count"], keepdims=0),
        helper.make_node("Min", ["q_count", "one"], ["q_present"]),
        helper.make_node("Min", ["d_count", "one"], ["d_present"]),
        helper.make_node("Mul", ["q_present", "d_present"], ["both"]),
        helper.make_node("Mul", ["both", "content"], ["both_content"]),
        helper.make_node("ReduceSum", ["both_content", "axis_last"], ["overlap"], keepdims=1),
        helper.make_node("Mul", ["overlap", "two"], ["doubled"]),
        helper.make_node("Sub", ["doubled", "one"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny-cross-encoder", inputs, [output], initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tiny-ce"
    directory.mkdir()
    write_cross_encoder(directory / "model.onnx")
    write_tokenizer(directory / "tokenizer.json")
    return directory


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def result(content: str, score: float = 0.5, **extra: object) -> dict[str, object]:
    return {"content": content, "score": score, "source": "/m/a.md", **extra}


def test_scores_are_the_models_probabilities(model_dir: Path) -> None:
    ce = CrossEncoderReranker(str(model_dir))
    scores = ce.score("milvus timeout", ["Milvus timeout again", "the milvus database", "pasta recipe", ""])
    assert scores == pytest.approx([sigmoid(3), sigmoid(1), sigmoid(-1), sigmoid(-1)])


def test_rerank_sorts_replaces_scores_and_keeps_top_k(model_dir: Path) -> None:
    results = [
        result("cooking pasta", 0.9, chunk_hash="a"),
        result("milvus database timeout <!-- session:x -->", 0.8, chunk_hash="b"),
        result("milvus only", 0.7, chunk_hash="c"),
    ]
    ranked = CrossEncoderReranker(str(model_dir)).rerank("milvus timeout", results, top_k=2)
    assert [r["chunk_hash"] for r in ranked] == ["b", "c"]
    assert ranked[0]["score"] == pytest.approx(sigmoid(3))
    assert ranked[1]["score"] == pytest.approx(sigmoid(1))
    assert ranked[0]["source"] == "/m/a.md"  # other keys survive
    assert results[0]["score"] == 0.9  # the caller's dicts are not modified


def test_batches_of_mixed_lengths_score_like_single_pairs(model_dir: Path) -> None:
    ce = CrossEncoderReranker(str(model_dir))
    passages = ["milvus " * n + "timeout" * (n % 2) for n in range(1, 20)]
    together = ce.score("milvus timeout", passages)
    alone = [ce.score("milvus timeout", [p])[0] for p in passages]
    assert together == pytest.approx(alone)


def test_two_column_and_other_output_shapes() -> None:
    two = _probabilities(np.array([[0.0, 2.0], [1.0, 1.0]]))
    assert two == pytest.approx([math.exp(2) / (1 + math.exp(2)), 0.5])
    flat = _probabilities(np.array([0.0, 3.0]))
    assert flat == pytest.approx([0.5, sigmoid(3)])


def test_found_in_the_huggingface_cache(model_dir: Path) -> None:
    hub = Path.home() / ".cache" / "huggingface" / "hub" / "models--acme--tiny-ce"
    snapshot = hub / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (snapshot / name).write_bytes((model_dir / name).read_bytes())
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("0123abcd")
    ce = CrossEncoderReranker("acme/tiny-ce")
    assert ce.files.source.startswith("HuggingFace cache")
    assert ce.score("recipe", ["pasta recipe"]) == pytest.approx([sigmoid(1)])


def test_found_in_an_installed_package(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "tiny_ce_models"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("model.onnx", "tokenizer.json"):
        (package / "data" / name).write_bytes((model_dir / name).read_bytes())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(
        reranker.PACKAGED_RERANKERS,
        "acme/packaged-ce",
        PackagedReranker(("tiny_ce_models", "data/model.onnx"), ("tiny_ce_models", "data/tokenizer.json")),
    )
    ce = CrossEncoderReranker("acme/packaged-ce")
    assert ce.files.source == "package tiny_ce_models"


def test_unknown_model_fails_fast_naming_every_place_tried() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        CrossEncoderReranker("acme/nowhere")
    message = str(info.value)
    assert "reranker model 'acme/nowhere'" in message
    assert "installed packages" in message and "HuggingFace cache" in message
    assert "HF_HUB_OFFLINE" in message
    assert "reranker.model" in info.value.hint


def test_a_directory_without_model_files_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError) as info:
        CrossEncoderReranker(str(tmp_path / "empty"))
    assert "Reranker model" in str(info.value) and "reranker.model" in info.value.hint


def test_without_a_backend_it_says_so_and_returns_top_k(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    monkeypatch.setattr(reranker, "_warned_backend", False)
    candidates = [result(f"text {i}", 1.0 - i / 100) for i in range(30)]
    with caplog.at_level(logging.WARNING, logger="memsearch.reranker"):
        kept = rerank("query", candidates, model_name="acme/any", top_k=10)
        rerank("query", candidates, model_name="acme/any", top_k=10)
    assert kept == candidates[:10]
    warnings = [r for r in caplog.records if "reranking is unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "onnxruntime" in warnings[0].getMessage()
    assert rerank("query", [], top_k=3) == []


def _memory(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    folder.mkdir()
    notes = {
        "a.md": "# Cooking\n\nA pasta recipe with tomatoes.\n",
        "b.md": "# Ops\n\nThe milvus database had a timeout at noon.\n",
        "c.md": "# Ops notes\n\nMilvus restarted.\n",
        "d.md": "# Misc\n\nNothing relevant here at all.\n",
    }
    for name, text in notes.items():
        (folder / name).write_text(text)
    return folder


async def test_memsearch_search_reranks_three_times_top_k(model_dir: Path, tmp_path: Path) -> None:
    folder = _memory(tmp_path)
    kwargs = {"embedding_provider": "hash", "milvus_uri": str(tmp_path / "m.db"), "embedding_cache": False}
    with MemSearch([folder], reranker_model=str(model_dir), **kwargs) as ms:  # type: ignore[arg-type]
        await ms.index()
        hits = await ms.search("milvus timeout", top_k=2)
    assert [Path(h["source"]).name for h in hits] == ["b.md", "c.md"]
    assert [h["score"] for h in hits] == pytest.approx([sigmoid(3), sigmoid(1)])


async def test_memsearch_without_backend_returns_top_k_not_candidates(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _memory(tmp_path)
    kwargs = {"embedding_provider": "hash", "milvus_uri": str(tmp_path / "m.db"), "embedding_cache": False}
    with MemSearch([folder], reranker_model=str(model_dir), **kwargs) as ms:  # type: ignore[arg-type]
        await ms.index()
        monkeypatch.setitem(sys.modules, "tokenizers", None)
        monkeypatch.setattr(reranker, "_warned_backend", False)
        hits = await ms.search("milvus timeout", top_k=1)
    assert len(hits) == 1
