"""Trust nothing memsearch did not write: its caches, its folders and the vectors it is given.

Real ``memsearch`` processes, the real packaged ONNX model and Milvus Lite; only the embedding API
is a local fake (tests/fake_servers.py) and "another local user" is tests/other_user.py's uid.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path

import jieba
import numpy as np
import pytest

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, fake_api  # noqa: F401  (fixture)
from other_user import OTHER_UID, as_other_user

pytestmark = [
    pytest.mark.skipif(os.getuid() != 0, reason="plants other users' files: needs root"),
    pytest.mark.fresh_caches,
]

NOTE_ZH = "# 部署笔记\n\n今天我们讨论了向量数据库的索引策略和中文分词，预发布数据库监听端口 6543。\n"
NOTE_EN = "# Deploy\n\nThe staging database listens on port 6543.\n\n## Food\n\nWe ate noodles for lunch.\n"


def _notes(tmp_path: Path, text: str = NOTE_EN) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "a.md").write_text(text, encoding="utf-8")
    return notes


def _ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    return proc


def _one_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    return lines[0]


def _top(query: str) -> dict[str, object]:
    hits = json.loads(_ok(memsearch("search", query, "--json-output")).stdout)
    assert hits, "no results"
    return dict(hits[0])


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every local user may write to, as the temp folder is (outside pytest's private
    tmp_path, which the other user cannot reach)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="memsearch-shared-"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the jieba table: not in the shared temp folder, never opened blocking -----------------------


def _jieba_key() -> str:
    dict_file = Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME
    st = dict_file.stat()
    key = f"{dict_file.resolve()} | {st.st_size} bytes | mtime_ns {st.st_mtime_ns}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def test_a_fifo_another_user_plants_at_the_jieba_cache_does_not_hang_chinese_work(
    tmp_path: Path, shared: Path
) -> None:
    digest = _jieba_key()
    old_name = shared / f"memsearch-jieba-{os.getuid()}-{digest}.bin"  # where it used to live
    planted = as_other_user(lambda: (os.mkfifo(old_name), b"planted")[1])()
    assert planted == b"planted" and stat.S_ISFIFO(os.lstat(old_name).st_mode)
    # And a FIFO of theirs where the table lives now (they cannot reach ~/.memsearch; root can).
    cache = Path.home() / ".memsearch" / "cache"
    cache.mkdir(parents=True)
    os.mkfifo(cache / f"jieba-{digest}.bin")
    os.chown(cache / f"jieba-{digest}.bin", OTHER_UID, OTHER_UID)
    notes = _notes(tmp_path, NOTE_ZH)
    env = {"TMPDIR": str(shared)}
    _ok(memsearch("index", str(notes), env=env, timeout=60))
    hits = json.loads(_ok(memsearch("search", "向量数据库", "--json-output", env=env, timeout=60)).stdout)
    assert hits and "向量数据库" in hits[0]["content"]
    table = cache / f"jieba-{digest}.bin"
    assert stat.S_ISREG(os.lstat(table).st_mode) and os.lstat(table).st_uid == os.getuid()  # rebuilt
    assert stat.S_IMODE(os.lstat(table).st_mode) == 0o600


# --- the optimised ONNX graph: sealed with checksums, ours, else rebuilt or not used ------------

_EMBED = (
    "import json\n"
    "from memsearch.embeddings.onnx import OnnxEmbedding\n"
    "texts = ['database connection timeout', 'we ate noodles for lunch', '中文 文本 测试']\n"
    "print(json.dumps(OnnxEmbedding().encode(texts).tolist()))\n"
)


def _embed(home: Path, **env: str) -> np.ndarray:
    out = subprocess.run(
        [sys.executable, "-c", _EMBED],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), **env},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return np.array(json.loads(out.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, np.ndarray]]:
    """One optimised graph built for the module (a template ~/.memsearch/onnx-optimized/<key>),
    and the vectors of the packaged graph itself, for comparison."""
    home = tmp_path_factory.mktemp("onnx-home")
    reference = _embed(home, MEMSEARCH_ONNX_CACHE="0")
    _embed(home)
    (folder,) = (home / ".memsearch" / "onnx-optimized").iterdir()
    yield folder, reference


def _planted_copy(built: tuple[Path, np.ndarray]) -> Path:
    folder, _ = built
    target = Path.home() / ".memsearch" / "onnx-optimized" / folder.name
    shutil.copytree(folder, target)
    return target


def _damage(weights: Path) -> None:
    """Overwrite 4 KB of every MB of the weights with 0xFF (float32 NaN): same size, same mtime."""
    st = weights.stat()
    with weights.open("r+b") as fh:
        for offset in range(0, st.st_size - 4096, 1 << 20):
            fh.seek(offset)
            fh.write(b"\xff" * 4096)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size


def test_a_same_size_damaged_optimised_graph_is_rebuilt(built: tuple[Path, np.ndarray]) -> None:
    copy = _planted_copy(built)
    assert np.allclose(_embed(Path.home()), built[1], atol=1e-4)  # a copied folder: hashed once, fine
    _damage(copy / "weights")
    vectors = _embed(Path.home())
    assert np.isfinite(vectors).all() and np.allclose(vectors, built[1], atol=1e-4)
    record = json.loads((copy / "checksums.json").read_text())  # rebuilt, and sealed again
    assert hashlib.sha256((copy / "weights").read_bytes()).hexdigest() == record["files"]["weights"]["sha256"]


def test_an_optimised_graph_folder_of_another_user_is_not_used(built: tuple[Path, np.ndarray]) -> None:
    copy = _planted_copy(built)
    _damage(copy / "weights")
    # A planted folder can carry a record that matches it: right checksums (stamps it cannot know).
    record = json.loads((copy / "checksums.json").read_text()) if (copy / "checksums.json").exists() else {}
    for name, entry in record.get("files", {}).items():
        entry.update(sha256=hashlib.sha256((copy / name).read_bytes()).hexdigest(), stamp=[0, 0, 0, 0])
    (copy / "checksums.json").write_text(json.dumps(record))
    for path in (copy, *copy.iterdir()):
        os.chown(path, OTHER_UID, OTHER_UID)
    vectors = _embed(Path.home())
    assert np.allclose(vectors, built[1], atol=1e-4)
    assert os.lstat(copy).st_uid == OTHER_UID  # left alone, and not loaded


# --- vectors: finite before they are stored, cached or used --------------------------------------


def test_an_api_returning_nan_is_one_error_and_nothing_is_stored(
    tmp_path: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    home = Path.home()
    (home / ".memsearch").mkdir()
    (home / ".memsearch" / "config.toml").write_text(
        f'[embedding]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake_api.url}/v1"\n'
    )
    notes = _notes(tmp_path)
    fake_api.nan()
    line = _one_error(memsearch("index", str(notes)))
    assert "openai" in line.lower() and "NaN" in line
    _one_error(memsearch("search", "staging database"))
    cache = home / ".memsearch" / "embedding-cache.sqlite"
    if cache.exists():  # nothing cached (the vectors were refused before the cache was asked)
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as conn:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE name = 'embeddings'").fetchall()
            assert not tables or conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 0
    fake_api.clear()
    stats = memsearch("stats")
    assert stats.returncode != 0 or "Total indexed chunks: 0" in stats.stdout
    _ok(memsearch("index", str(notes)))
    assert "staging database" in str(_top("staging database port")["content"])


def _nan_blob(dim: int) -> bytes:
    return array("f", [math.nan] * dim).tobytes()


def test_a_poisoned_embedding_cache_heals(tmp_path: Path) -> None:
    notes = _notes(tmp_path)
    _ok(memsearch("index", str(notes)))
    cache = Path.home() / ".memsearch" / "embedding-cache.sqlite"
    with sqlite3.connect(cache) as conn:  # as vectors from a damaged graph were once cached
        rows = conn.execute("SELECT text_sha256, dim FROM embeddings").fetchall()
        assert rows
        conn.executemany(
            "UPDATE embeddings SET vector = ? WHERE text_sha256 = ?", [(_nan_blob(d), k) for k, d in rows]
        )
    _ok(memsearch("index", str(notes), "--force"))
    top = _top("which port does the staging database listen on")
    assert "6543" in str(top["content"]) and math.isfinite(float(str(top["score"])))
    with sqlite3.connect(cache) as conn:
        blobs = [blob for (blob,) in conn.execute("SELECT vector FROM embeddings")]
    assert blobs and all(all(map(math.isfinite, array("f", blob))) for blob in blobs)  # rewritten


# --- private whatever the umask ------------------------------------------------------------------


def _loose(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        mode, want = stat.S_IMODE(st.st_mode), 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if mode & 0o077 or (stat.S_ISREG(st.st_mode) and mode != want):
            found.append(f"{stat.S_IMODE(st.st_mode):04o} {path}")
    return found


def test_with_umask_022_everything_memsearch_writes_is_private(tmp_path: Path) -> None:
    notes = _notes(tmp_path, NOTE_EN + NOTE_ZH)  # Chinese too: the jieba table is kept
    store = tmp_path / "project" / "index.db"
    old = os.umask(0o022)
    try:
        _ok(memsearch("index", str(notes)))  # the default store, under ~/.memsearch
        _ok(memsearch("index", str(notes), "--milvus-uri", str(store)))
        _top("staging database")
    finally:
        os.umask(old)
    home = Path.home() / ".memsearch"
    assert (home / "embedding-cache.sqlite").is_file() and (home / "milvus.db").is_dir()
    assert (home / "onnx-optimized").is_dir() and (home / "cache").is_dir()
    assert _loose(home) == [] and _loose(store) == []


def test_a_library_process_with_umask_022_keeps_its_folders_private(tmp_path: Path) -> None:
    """A program using ``MemSearch`` keeps its umask; memsearch's folders are still private, and
    the ones an older memsearch left open (0755) are closed."""
    home = Path.home() / ".memsearch"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "milvus.db").mkdir(mode=0o755)
    (home / "milvus.db").chmod(0o755)
    script = (
        "import os, sys\nos.umask(0o022)\nfrom memsearch import MemSearch\n"
        "import asyncio\nwith MemSearch([sys.argv[1]]) as ms:\n    asyncio.run(ms.index())\n"
    )
    notes = str(_notes(tmp_path))
    out = subprocess.run([sys.executable, "-c", script, notes], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    for folder in (home, home / "milvus.db", home / "onnx-optimized"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE((home / "embedding-cache.sqlite").stat().st_mode) == 0o600


def test_a_memsearch_home_that_is_a_file_is_one_error(tmp_path: Path) -> None:
    (Path.home() / ".memsearch").write_text("not a folder")
    notes = _notes(tmp_path)
    for args in (("index", str(notes)), ("search", "staging"), ("reset", "--yes")):
        line = _one_error(memsearch(*args, timeout=60))
        assert ".memsearch" in line and "not a directory" in line, args


def test_a_store_folder_another_user_made_is_refused(tmp_path: Path, shared: Path) -> None:
    """A store path in a shared folder that another user created first (with memories of theirs)
    is refused, not searched or written to."""
    store = shared / "team.db"
    as_other_user(lambda: (store.mkdir(), b"")[1])()
    assert os.lstat(store).st_uid == OTHER_UID
    notes = _notes(tmp_path)
    line = _one_error(memsearch("index", str(notes), "--milvus-uri", str(store)))
    assert str(store) in line and "owned by uid" in line
    assert list(store.iterdir()) == []
