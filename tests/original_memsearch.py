"""The original memsearch 0.4.23 beside ours: a side venv from the registry, and one embedding
endpoint both tools share.

Why: "switch without noticing" is only true if the original and this package read and write the
same Milvus Lite database interchangeably. The original embeds offline only through an
OpenAI-compatible endpoint, so :func:`serving_packaged_model` serves our packaged ONNX model
(all-MiniLM-L6-v2 int8) at ``/v1/embeddings`` on 127.0.0.1; both tools then use provider
``openai`` with the same ``--base-url`` and model name, hence the same vectors and chunk IDs.

The venv is built once under the host cache (``real_hosts.CACHE``) with ``jieba``: the original
opens a collection this package created only when jieba is installed (our content field asks for
the jieba analyzer; see docs/compatibility.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from evaluation.compat import source_release

from fake_servers import JsonHandler, serving
from real_hosts import CACHE, _locked

ORIGINAL = "memsearch==0.4.23"
#: The model name both tools send; it is part of every chunk ID.
MODEL = "all-MiniLM-L6-v2"


def original_cli() -> Path:
    """The original's ``memsearch`` command, installed into a cached side venv on first use."""
    venv = CACHE / "memsearch-0.4.23"
    done = venv / ".installed"
    with _locked(CACHE / "memsearch-0.4.23.lock"):
        if not done.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            pip = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", ORIGINAL, "jieba"],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert pip.returncode == 0, f"installing {ORIGINAL} failed:\n{pip.stdout}\n{pip.stderr}"
            done.write_text(ORIGINAL + "\n")
    return venv / "bin" / "memsearch"


def original_source() -> Path:
    """The original's source release (``tests/``, ``plugins/``), unpacked once into the cache."""
    with _locked(CACHE / "memsearch-0.4.23-src.lock"):
        return source_release(CACHE)


@contextlib.contextmanager
def serving_packaged_model() -> Iterator[str]:
    """``/v1/embeddings`` answered by our packaged ONNX model; yields the base URL (``.../v1``)."""
    from memsearch.embeddings.onnx import OnnxEmbedding

    model = OnnxEmbedding()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else texts
            vectors = model.encode(list(texts)).tolist() if texts else []
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            answer = {
                "object": "list",
                "data": data,
                "model": body.get("model", MODEL),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
            self._send(200, json.dumps(answer).encode())

    with serving(Handler, "packaged-model-endpoint") as url:
        yield f"{url}/v1"


def flags(base_url: str, db: Path, collection: str) -> list[str]:
    """The flags that make either tool use the shared endpoint, model and store."""
    return [
        "--provider",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        base_url,
        "--milvus-uri",
        str(db),
        "--collection",
        collection,
    ]


def run(
    cli: Path | str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one tool's CLI with a fake API key (the endpoint ignores it)."""
    environ = {**os.environ, "OPENAI_API_KEY": "sk-local", **(env or {})}
    return subprocess.run(
        [str(cli), *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=300
    )
