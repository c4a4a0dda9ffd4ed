"""The original memsearch 0.4.23 beside ours: a side venv from the registry, and local embedding
endpoints both tools share.

Used by ``make bench`` (evaluation/bench.py) and by the compatibility tests
(tests/original_memsearch.py imports from here). The original embeds offline only through an
OpenAI-compatible endpoint, so :func:`serving_packaged_model` serves our packaged ONNX model
(all-MiniLM-L6-v2 int8) at ``/v1/embeddings`` on 127.0.0.1; both tools then use provider ``openai``
with the same ``--base-url`` and model name, hence the same vectors and chunk IDs.
:func:`serving_hashed_vectors` answers the same requests with a fast hashing embedder of the same
dimension, for stores too large to embed with the model in a benchmark run.

The venv is built once under the host cache (``MEMSEARCH_HOSTS_CACHE``, default
``~/.cache/memsearch-test-hosts``, shared with the real-host tests) with ``jieba``: the original
opens a collection this package created only when jieba is installed (our content field asks for
the jieba analyzer; see docs/compatibility.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from evaluation.compat import source_release

ORIGINAL = "memsearch==0.4.23"
#: The model name both tools send; it is part of every chunk ID.
MODEL = "all-MiniLM-L6-v2"
#: The API key the local embedding endpoints take: any value does; one name, so no file of the
#: repository carries a key-shaped literal (the detector's false-positive test reads them all).
LOCAL_KEY = "sk-local"
#: The model's dimension, which the hashing endpoint answers with too.
DIMENSION = 384

#: Resolved at import, before a test fixture points HOME at a temporary folder.
CACHE = Path(os.environ.get("MEMSEARCH_HOSTS_CACHE") or Path.home() / ".cache" / "memsearch-test-hosts")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock file, so parallel test workers install the venv once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def original_venv() -> Path:
    """The original's side venv, installed from the registry on first use; returns its folder."""
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
            if pip.returncode != 0:
                raise RuntimeError(f"installing {ORIGINAL} failed:\n{pip.stdout}\n{pip.stderr}")
            done.write_text(ORIGINAL + "\n")
    return venv


def original_cli() -> Path:
    """The original's ``memsearch`` command (installs the side venv on first use)."""
    return original_venv() / "bin" / "memsearch"


def original_python() -> Path:
    """The side venv's interpreter, for in-process measurements of the original."""
    return original_venv() / "bin" / "python"


def original_source() -> Path:
    """The original's source release (``tests/``, ``plugins/``), unpacked once into the cache."""
    with _locked(CACHE / "memsearch-0.4.23-src.lock"):
        return source_release(CACHE)


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


# --- the local embedding endpoints ---------------------------------------------------------------

Embed = Callable[[list[str]], list[list[float]]]


def _handler(embed: Embed) -> type[BaseHTTPRequestHandler]:
    """An OpenAI-compatible ``POST /v1/embeddings`` handler over ``embed`` (keep-alive, quiet)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body go out as two writes; with Nagle's algorithm on, the body waits
        # for the client's delayed ACK of the headers (~40 ms on Linux) on every request after the
        # first of a keep-alive connection. Real endpoints set TCP_NODELAY, and so does this one.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep the output quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else list(texts)
            vectors = embed(texts) if texts else []
            answer = {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "model": body.get("model", MODEL),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
            payload = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                self.wfile.write(payload)

    return Handler


@contextlib.contextmanager
def _serving(embed: Embed, name: str) -> Iterator[str]:
    """Serve ``embed`` on 127.0.0.1 (a free port) in a thread; yields the base URL (``.../v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(embed))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def serving_packaged_model() -> Iterator[str]:
    """``/v1/embeddings`` answered by our packaged ONNX model; yields the base URL (``.../v1``).

    The model runs as ours runs it in a one-shot index (``OnnxEmbedding.bulk``): a request of
    several texts one run per core at once, a lone text (a query) one run on every core. So the
    original's batches get the same model throughput as ours' full index, and the figures compare
    what each tool does around the model."""
    from memsearch.embeddings.onnx import OnnxEmbedding

    model = OnnxEmbedding()

    def embed(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = model.encode(texts).tolist()
        return vectors

    with model.bulk(), _serving(embed, "packaged-model-endpoint") as url:
        yield url


def hashed_vector(text: str) -> list[float]:
    """A unit vector of token hashes: cheap, deterministic, and similar for texts sharing words."""
    vector = [0.0] * DIMENSION
    for token in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "little") % DIMENSION] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@contextlib.contextmanager
def serving_hashed_vectors() -> Iterator[str]:
    """``/v1/embeddings`` answered by :func:`hashed_vector`; yields the base URL (``.../v1``)."""
    with _serving(lambda texts: [hashed_vector(t) for t in texts], "hashed-vector-endpoint") as url:
        yield url
