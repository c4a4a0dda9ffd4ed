"""The scale bench's stores: built once per size, cached under ``evaluation/.cache/scale``.

Why cached: indexing 100,000 chunks takes ours ~20 minutes and the original far longer on two
cores, and no row measures it. Each size lives in ``<cache>/<chunks>/`` (the corpus, each tool's
Milvus Lite store and its HOME, which holds ours' manifest and optimised model), built in place
because every stored row names its file by absolute path. After the build a copy is kept beside it
(``<chunks>.pristine``); every bench run starts from that copy again (``cp -a`` keeps the files'
modification times, which the manifest and the windows of days read), so the rows that write
(one changed file, ``watch``, ``forget``) never leave a later run a different store.

Embeddings: both tools' stores are built through a local ``/v1/embeddings`` endpoint that answers
with hashed vectors (``evaluation.original.serving_hashed_vectors``, 384 dimensions): fast and
deterministic, and never used for quality. Ours is built under the name of its default ONNX model,
so its chunk IDs and manifest are the ones the default model gives: every measured command then
runs with the default model (the query, and the new chunks of a changed file, embedded by the
real model) against stored vectors that are hashes. The original is built under the bench's model
name and searched through the endpoint that serves the real model (``serving_packaged_model``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluation import scale_corpus
from evaluation.original import LOCAL_KEY, MODEL, original_cli, original_python

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "evaluation" / ".cache" / "scale"
#: The model ours runs by default; its stores are built under this name (see the module docstring).
OURS_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Changes when what a build writes changes (a cached size with another stamp is rebuilt).
BUILD_VERSION = 1

#: Builds one tool's store in its own interpreter: ``MemSearch(paths).index()`` through the
#: hashing endpoint; ours without its embedding cache (the measured commands must not find hashed
#: vectors there; the original has none).
_BUILD = r"""
import asyncio, json, os, sys, time
from memsearch import MemSearch

paths, uri, model, base_url, cache = json.loads(sys.argv[1])
kwargs = dict(embedding_provider="openai", embedding_model=model, embedding_base_url=base_url,
              embedding_api_key=os.environ["OPENAI_API_KEY"], milvus_uri=uri)
if not cache:
    kwargs["embedding_cache"] = False
start = time.perf_counter()
ms = MemSearch(paths, **kwargs)
chunks = asyncio.run(ms.index())
ms.close()
print(json.dumps({"chunks": chunks, "seconds": time.perf_counter() - start}))
"""


@dataclass
class Tool:
    """One tool at one size: how to run it, its store and its HOME."""

    name: str
    python: str
    cli: list[str]
    db: Path
    home: Path
    #: Its own copy of the corpus (each tool sees only its own edits; the stores name these paths).
    corpus: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self, **more: str) -> dict[str, str]:
        # Ours runs this checkout (a relative PYTHONPATH entry, `PYTHONPATH=src`, made absolute:
        # commands run in their HOME); the original runs its own venv's package, never this one.
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        path = os.pathsep.join(os.path.abspath(p) for p in entries if p)
        return {
            **base,
            **({"PYTHONPATH": path} if path and self.name == "ours" else {}),
            "HOME": str(self.home),
            "OPENAI_API_KEY": LOCAL_KEY,
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "MEMSEARCH_SERVICE_AUTOSTART": "0",
            **self.extra_env,
            **more,
        }

    def command(self, *args: str) -> list[str]:
        return [*self.cli, *args]

    def configure(self, model_url: str) -> None:
        """The HOME's config file names the store (and for the original the model endpoint), so
        every command of either tool runs without flags, as a configured user's does."""
        lines = ["[milvus]", f'uri = "{self.db}"']
        if self.name != "ours":
            lines += [
                "",
                "[embedding]",
                'provider = "openai"',
                f'model = "{MODEL}"',
                f'base_url = "{model_url}"',
            ]
        config = self.home / ".memsearch" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("\n".join(lines) + "\n")


@dataclass
class Size:
    """One corpus size: where its files and stores are, and both tools on it."""

    chunks: int
    root: Path
    ours: Tool
    original: Tool | None  # None: the original is left out at this size (``--no-original``)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def tools(self) -> list[Tool]:
        return [self.ours] + ([self.original] if self.original else [])


def tools_at(root: Path, with_original: bool) -> tuple[Tool, Tool | None]:
    ours = Tool(
        "ours",
        sys.executable,
        [sys.executable, "-m", "memsearch"],
        root / "ours.db",
        root / "home-ours",
        root / "corpus",
    )
    original = None
    if with_original:
        original = Tool(
            "original",
            str(original_python()),
            [str(original_cli())],
            root / "original.db",
            root / "home-original",
            root / "corpus-original",
        )
    return ours, original


def log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def prepare(
    chunks: int, hash_url: str, *, with_original: bool, rebuild: bool = False, cache: Path | None = None
) -> Size:
    """The size ``chunks`` ready to measure: built (or taken from ``cache``, default :data:`CACHE`),
    then restored from its pristine copy so that every run starts from the same files."""
    root = (cache or CACHE) / str(chunks)
    pristine = (cache or CACHE) / f"{chunks}.pristine"
    ours, original = tools_at(root, with_original)
    size = Size(chunks, root, ours, original)
    stamp = _stamp(chunks)
    have = _read_stamp(pristine)
    if rebuild or have.get("corpus") != stamp["corpus"] or have.get("ours") != stamp["ours"]:
        _remove(root, pristine)
        have = {}
    missing = [t for t in size.tools if t.name not in have.get("built", {})]
    if missing:
        if pristine.exists():  # the ours-only cache, now with the original as well
            _restore(pristine, root)
        if not ours.corpus.exists():
            log(f"{chunks:,} chunks: writing the corpus")
            have["stats"] = scale_corpus.generate(ours.corpus, chunks)
        for tool in missing:
            if not tool.corpus.exists():
                subprocess.run(["cp", "-a", str(ours.corpus), str(tool.corpus)], check=True)
            started = time.perf_counter()
            log(f"{chunks:,} chunks: {tool.name} indexes the corpus (hashed vectors; cached afterwards)")
            built = build(tool, tool.corpus, hash_url)
            have.setdefault("built", {})[tool.name] = {
                **built,
                "wall": round(time.perf_counter() - started, 1),
                "on": time.strftime("%Y-%m-%d %H:%M"),
            }
            log(
                f"{chunks:,} chunks: {tool.name} built {built['chunks']:,} chunks in {built['seconds']:.0f} s"
            )
        _prepare_model(ours)
        have.update(stamp)
        (root / "stamp.json").write_text(json.dumps(have, indent=1))
        shutil.rmtree(pristine, ignore_errors=True)
        subprocess.run(["cp", "-a", str(root), str(pristine)], check=True)
    else:
        _restore(pristine, root)
    size.stats = have
    return size


def build(tool: Tool, corpus: Path, hash_url: str) -> dict[str, Any]:
    """Index ``corpus`` into ``tool``'s store through the hashing endpoint (see the docstring)."""
    tool.home.mkdir(parents=True, exist_ok=True)
    model = OURS_MODEL if tool.name == "ours" else MODEL
    args = json.dumps([[str(corpus)], str(tool.db), model, hash_url, tool.name != "ours"])
    proc = subprocess.run([tool.python, "-c", _BUILD, args], env=tool.env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tool.name}: building the store failed:\n{proc.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer


def _prepare_model(ours: Tool) -> None:
    """Ours' optimised ONNX graph, built once into its HOME (as a user's first run would)."""
    code = "from memsearch.embeddings.onnx import OnnxEmbedding\nOnnxEmbedding().prepare()\n"
    subprocess.run([ours.python, "-c", code], env=ours.env(), check=True, capture_output=True)


def _stamp(chunks: int) -> dict[str, Any]:
    return {"corpus": [scale_corpus.VERSION, chunks], "ours": BUILD_VERSION}


def _read_stamp(pristine: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((pristine / "stamp.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


def _remove(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _restore(pristine: Path, root: Path) -> None:
    """The size's folder as it was built (each run starts from the same files and stores)."""
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["cp", "-a", str(pristine), str(root)], check=True)
