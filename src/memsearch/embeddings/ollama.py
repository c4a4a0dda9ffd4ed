"""The Ollama provider: a local (or remote) Ollama server's ``/api/embed`` endpoint.

This module owns how the server address is found (``base_url``, else ``OLLAMA_HOST`` with Ollama's
own shorthand rules, else ``http://localhost:11434``), the dimensions of common embedding models,
and their query/document prefixes (nomic-embed-text is trained with ``search_query:`` /
``search_document:``). No SDK is needed: it is one JSON POST (``embeddings/rest.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit

from memsearch.callerenv import getenv
from memsearch.embeddings.base import EmbeddingErrors
from memsearch.embeddings.rest import RestEmbedder
from memsearch.http import ApiErrors

DEFAULT_HOST = "http://localhost:11434"
DEFAULT_PORT = 11434

#: model (without tag) -> dimension.
OLLAMA_DIMENSIONS: dict[str, int] = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "snowflake-arctic-embed": 1024,
    "snowflake-arctic-embed2": 1024,
    "bge-m3": 1024,
    "bge-large": 1024,
    "embeddinggemma": 768,
}

_RETRIEVAL_INSTRUCTION = "Represent this sentence for searching relevant passages: "

#: model (without tag) -> (query prefix, document prefix), as each model card prescribes.
OLLAMA_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_query: ", "search_document: "),
    "mxbai-embed-large": (_RETRIEVAL_INSTRUCTION, ""),
    "snowflake-arctic-embed": (_RETRIEVAL_INSTRUCTION, ""),
}


def _base_name(model: str) -> str:
    """``nomic-embed-text:latest`` -> ``nomic-embed-text`` (tables are keyed without tags)."""
    name, _, tag = model.partition(":")
    return name if tag in ("", "latest") else model


def host_from_env(value: str) -> str:
    """Expand ``OLLAMA_HOST`` the way Ollama does: default scheme http, port 11434, 0.0.0.0 → local."""
    value = value.strip()
    if "://" not in value:
        value = "http://" + value
    parts = urlsplit(value)
    host = parts.hostname or "localhost"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or (443 if parts.scheme == "https" else DEFAULT_PORT)
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"


class OllamaEmbedding(RestEmbedder):
    """Embeddings from an Ollama server (``POST {host}/api/embed``)."""

    provider_name = "ollama"
    default_model = "nomic-embed-text"
    default_batch_size = 64
    key_required = False  # Ollama itself takes no key; one is sent if given (e.g. behind a proxy)
    timeout = 300.0  # the first request loads the model into memory
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("Ollama", ("OLLAMA_API_KEY",))

    def _configure(self, *, base_url: str | None, api_key: str | None) -> None:
        self.errors = EmbeddingErrors(
            "Ollama",
            ("OLLAMA_API_KEY",),
            ((404, f"Pull the model first: ollama pull {self._model}"),),
        )
        self.query_prefix, self.document_prefix = OLLAMA_PREFIXES.get(_base_name(self._model), ("", ""))

    def _known_dimension(self) -> int | None:
        return OLLAMA_DIMENSIONS.get(_base_name(self._model))

    def _resolve_base_url(self, base_url: str | None) -> str:
        if base_url:
            return base_url if "://" in base_url else "http://" + base_url
        env = getenv("OLLAMA_HOST").strip()
        return host_from_env(env) if env else DEFAULT_HOST

    def _url(self) -> str:
        return f"{self.base_url}/api/embed"

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        return {"model": self._model, "input": texts, "truncate": True}

    def _vectors(self, payload: Any) -> list[list[float]]:
        return [list(map(float, vector)) for vector in payload["embeddings"]]
