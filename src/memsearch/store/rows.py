"""What Milvus will hold for a row: valid UTF-8, text fields cut to the schema's byte limits, and
upsert batches bounded by row count and message size.

Owns the VARCHAR limits of the schema and the cleaning applied to every value written, so that a
filter on a value (:mod:`memsearch.store.filters`) can be built from the value as stored. Milvus
server counts VARCHAR ``max_length`` in bytes, Milvus Lite in characters; a byte limit satisfies
both, and cutting an over-long value keeps its batch from failing as a whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)

#: The fields every search/query result carries, in this order.
QUERY_FIELDS = ["content", "source", "heading", "chunk_hash", "heading_level", "start_line", "end_line"]

#: VARCHAR limits of the schema, in UTF-8 bytes (see the module docstring for why bytes).
FIELD_MAX_BYTES = {"chunk_hash": 64, "content": 65535, "source": 1024, "heading": 1024}
#: Fields cut to their limit on upsert rather than failing the batch. ``chunk_hash`` is an
#: identity and is never cut.
TRUNCATED_FIELDS = ("content", "source", "heading")

UPSERT_MAX_ROWS = 500
UPSERT_MAX_BYTES = 16 * 1024 * 1024  # stay well under gRPC message limits


def utf8_safe(text: str) -> str:
    """``text`` with lone surrogates (undecodable file names) replaced by U+FFFD.

    Milvus only carries valid UTF-8; replacing them the same way on write and in filters keeps
    such a file findable instead of failing its batch.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes`` (whole characters)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def stored_value(field: str, value: str) -> str:
    """The value Milvus will hold for ``field`` after upsert's cleaning and truncation."""
    cleaned = utf8_safe(value)
    if field in TRUNCATED_FIELDS:
        cleaned = truncate_utf8(cleaned, FIELD_MAX_BYTES[field])
    return cleaned


def prepare_rows(chunks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy rows with long text fields truncated and duplicate chunk hashes collapsed (last wins).

    Duplicate primary keys in one upsert are undefined behaviour in Milvus: which row wins, or
    whether both land, depends on the server, so the last one is kept here.
    """
    rows: dict[Any, dict[str, Any]] = {}
    for chunk in chunks:
        row = dict(chunk)
        for field in TRUNCATED_FIELDS:
            value = row.get(field)
            if isinstance(value, str):
                stored = stored_value(field, value)
                if len(stored) < len(value):
                    logger.warning(
                        "Truncated %s of chunk %s from %d to %d characters (Milvus limit %d bytes)",
                        field,
                        row.get("chunk_hash"),
                        len(value),
                        len(stored),
                        FIELD_MAX_BYTES[field],
                    )
                row[field] = stored
        key = row.get("chunk_hash")
        rows.pop(key, None)
        rows[key] = row
    return list(rows.values())


def _row_size(row: dict[str, Any]) -> int:
    text = sum(len(v) * 4 for v in row.values() if isinstance(v, str))
    vector = row.get("embedding")
    return text + (len(vector) * 8 if isinstance(vector, Sequence) else 0) + 256


def batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Split rows into upsert calls bounded by row count and (estimated) message size."""
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        row_size = _row_size(row)
        if batch and (len(batch) >= UPSERT_MAX_ROWS or size + row_size > UPSERT_MAX_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += row_size
    if batch:
        yield batch


def chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
