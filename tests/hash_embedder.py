"""A deterministic fake embedding provider for tests: token hashing into 64 dimensions.

Why: tests of the indexer, store, CLI and service need embeddings that are instant, need no model
or network, and still make lexically similar texts near each other. Each token (a lowercase run of
letters/digits/underscores, or a single CJK character) adds ±1 to one of 64 coordinates chosen by
a hash of the token; the vector is then L2-normalised. Call :func:`register` to make it available
as ``get_provider("hash")`` (and so ``--provider hash``) through the real provider table.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import ClassVar

from memsearch.embeddings import ProviderSpec, register_provider
from memsearch.embeddings.base import ApiErrors, BatchingEmbedder

DIMENSION = 64
NAME = "hash"
DEFAULT_MODEL = "hash-64"

_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]"  # one CJK character = one token
    r"|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+"
)


def tokens(text: str) -> list[str]:
    """Lowercase word tokens, each CJK character a token of its own."""
    return _TOKEN.findall(text.lower())


def hash_vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """The deterministic unit vector of ``text`` (an empty text gets the vector of a marker token)."""
    vector = [0.0] * dimension
    for token in tokens(text) or ["<empty>"]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % dimension
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:  # the tokens cancelled out exactly: any fixed unit vector will do
        return [1.0] + [0.0] * (dimension - 1)
    return [v / norm for v in vector]


class HashEmbedder(BatchingEmbedder):
    """The fake provider; counts its calls so tests can assert what was (not) embedded."""

    provider_name = NAME
    default_model = DEFAULT_MODEL
    default_batch_size = 16
    known_dimensions: ClassVar[dict[str, int]] = {DEFAULT_MODEL: DIMENSION}
    api_errors: ClassVar[ApiErrors] = ApiErrors("hash")

    def __init__(self, *, model: str | None = None, batch_size: int = 0) -> None:
        super().__init__(model=model, batch_size=batch_size)
        self._dimension = DIMENSION
        self.calls = 0  # batches embedded
        self.embedded: list[str] = []  # every text embedded, in order

    async def _embed_batch(self, conn: object, texts: list[str], *, query: bool) -> list[list[float]]:
        self.calls += 1
        self.embedded.extend(texts)
        return [hash_vector(text) for text in texts]


def register() -> None:
    """Register the fake as provider ``"hash"`` (idempotent)."""
    register_provider(
        ProviderSpec(
            NAME, f"{__name__}:HashEmbedder", DEFAULT_MODEL, None, frozenset({"model", "batch_size"})
        )
    )
