"""``memsearch forget``: which lines of which memory files a request names, and what to show.

A request names memory in the user's words (a chunk hash from ``search``, a session or turn from a
journal anchor, a query); this module turns it into :class:`Block`\\ s, line ranges of markdown
files, because the markdown is the truth and everything else (the index, the embedding cache, the
manifest) is derived from it. :mod:`memsearch.engine.forget_apply` removes the blocks, all or none.

What a block covers:

- in a daily journal, a whole entry: its ``### HH:MM`` heading, anchor and bullets, up to the next
  heading. A chunk or query hit in a journal names the entries its lines overlap (a ``## Memory
  Compact`` section or other prose is removed by the chunk's own lines). A ``## Session`` heading
  whose entries all go goes with them (:func:`session_headings`);
- in a hand-written note, the chunk's own lines, its heading line included when the chunk starts
  with it (the other chunks of a long section stay, under the heading above them).

A query names memory only through hits that match it strongly (:func:`strong_hits`): a hybrid
search always ranks something, and the best of nothing must never be deleted.

Previews go through the configured redaction, so the confirmation never prints a secret.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.engine.edits import encode, split_keep
from memsearch.engine.journal import is_journal, journal_files, parse_anchor_fields

if TYPE_CHECKING:
    from memsearch.chunker import Chunk
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import Memory
    from memsearch.redact import Redactor

__all__ = [
    "Block",
    "block_digest",
    "blocks_at",
    "blocks_for_chunk",
    "blocks_for_entries",
    "entries",
    "forget_floor",
    "read_lines",
    "select_blocks",
    "session_headings",
    "strong_hits",
]

_LONE_CR = re.compile(r"\r(?!\n)")
PREVIEW_CHARS = 100


@dataclass(frozen=True)
class Block:
    """Lines ``[start, end)`` (0-based) of ``path`` to remove; ``digest`` is their bytes' sha256, so a
    block shown for confirmation is removed only while the file still holds exactly those lines."""

    path: Path
    start: int
    end: int
    digest: str
    heading: str = ""
    anchor: Mapping[str, str] = field(default_factory=dict)
    preview: str = ""
    #: The relevance of the search hit that named this block (``forget --query``), else None.
    relevance: float | None = None

    @property
    def span(self) -> str:
        """``lines a-b`` (1-based, as editors and ``expand`` number them)."""
        return f"lines {self.start + 1}-{self.end}"


def read_lines(path: Path) -> list[str]:
    """The lines of ``path`` with their line breaks, decoded so that joining and encoding them again
    gives the file's exact bytes (undecodable bytes survive as surrogates)."""
    from memsearch.files import open_own

    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as fh:
        return split_keep(fh.read().decode("utf-8", errors="surrogateescape"))


def block_digest(lines: Sequence[str], start: int, end: int) -> str:
    return hashlib.sha256(encode(lines[start:end])).hexdigest()


# --- hits of a query ---------------------------------------------------------------------------


def forget_floor(configured: float) -> float:
    """The least relevance a hit needs for ``forget --query`` to propose it: the configured
    strong-match floor (``search.min_relevance``), never below the calibrated default (a floor
    lowered to see more recall hits must not make forgetting guess)."""
    from memsearch.config.schema import DEFAULT_MIN_RELEVANCE

    return max(configured, DEFAULT_MIN_RELEVANCE)


def strong_hits(query: str, hits: Sequence[Mapping[str, Any]], floor: float) -> list[Mapping[str, Any]]:
    """The hits of ``query`` at or above ``floor``; WeakMatchError (naming the best relevance and
    the floor) when there is none: nothing is forgotten on a guess."""
    from memsearch.errors import WeakMatchError

    strong = [hit for hit in hits if float(hit.get("relevance") or 0.0) >= floor]
    if strong:
        return strong
    best = max((float(hit.get("relevance") or 0.0) for hit in hits), default=None)
    found = f"its best hit has relevance {best:.2f}" if best is not None else "nothing is indexed"
    raise WeakMatchError(
        f"nothing matches the query strongly enough to forget ({found}; the floor is {floor:.2f}): "
        "no memory was forgotten",
        hint=f"check with `memsearch search {shlex.quote(query)}`, then forget the hit you mean by its hash",
    )


# --- journals ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    start: int
    end: int
    heading: str
    anchor: dict[str, str]


def _headings(lines: Sequence[str]) -> list[tuple[int, int, str]]:
    from memsearch.chunker import find_headings

    return [(h.index, h.level, h.title) for h in find_headings([ln.rstrip("\r\n") for ln in lines])]


def entries(lines: Sequence[str]) -> list[_Entry]:
    """The ``###`` entries of a journal: heading to the next heading, with their anchor fields."""
    heads = _headings(lines)
    found = []
    for k, (index, level, title) in enumerate(heads):
        if level != 3:
            continue
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        anchor: dict[str, str] = {}
        for line in lines[index + 1 : end]:
            if "<!--" in line:
                anchor = parse_anchor_fields(line) or {}
                if anchor:
                    break
        found.append(_Entry(index, end, title, anchor))
    return found


def session_headings(lines: Sequence[str], removed: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``## Session`` sections (heading to the next ``#``/``##`` heading) every entry of which
    is among ``removed`` and that hold nothing else: removed whole, so no empty heading is left."""
    heads = _headings(lines)
    whole = []
    for k, (index, level, title) in enumerate(heads):
        if level != 2 or not title.startswith("Session"):
            continue
        end = next((i for i, lv, _ in heads[k + 1 :] if lv <= 2), len(lines))
        inner = [(e.start, e.end) for e in entries(lines[:end]) if e.start > index]
        first = inner[0][0] if inner else end
        prose = any(line.strip() for line in lines[index + 1 : first])
        if inner and not prose and all(span in removed for span in inner) and inner[-1][1] == end:
            whole.append((index, end))
    return whole


def blocks_for_entries(
    memory_dirs: Sequence[str | Path], match: Mapping[str, str], redactor: Redactor
) -> list[Block]:
    """Every journal entry under ``memory_dirs`` whose anchor has all the fields of ``match``."""
    blocks: list[Block] = []
    for directory in memory_dirs:
        for path in sorted(journal_files(directory)):
            lines = read_lines(path)
            for e in entries(lines):
                if e.anchor and all(e.anchor.get(k) == v for k, v in match.items()):
                    blocks.append(_block(path, lines, e.start, e.end, e.heading, e.anchor, redactor))
    return blocks


def blocks_at(path: Path, line: int, redactor: Redactor) -> list[Block]:
    """The journal entry of ``path`` whose ``###`` heading is on ``line`` (1-based, as the
    timeline names an entry); [] when no entry starts there (the file changed)."""
    if not is_journal(path):
        return []
    lines = read_lines(path)
    return [
        _block(path, lines, e.start, e.end, e.heading, e.anchor, redactor)
        for e in entries(lines)
        if e.start + 1 == line
    ]


def select_blocks(
    memory: Memory,
    cfg: MemSearchConfig,
    *,
    chunk_hashes: Sequence[str] = (),
    match: Mapping[str, str] | None = None,
    memory_dirs: Sequence[str | Path] = (),
    query: str | None = None,
    top_k: int = 1,
    entry: tuple[Path, int] | None = None,
    redactors: tuple[Redactor, Redactor],
    warn: Callable[[str], None] = lambda message: None,
    note: Callable[[str], None] = lambda message: None,
) -> list[Block]:
    """Every block the selectors name, each once, in file order: stored chunks by hash, journal
    entries whose anchor has all the fields of ``match`` (under ``memory_dirs``), the hits of a
    ``query`` that match strongly (:func:`strong_hits`: WeakMatchError when none does; ``note`` says
    how many weak ones were left out), the journal ``entry`` at (file, line). ``redactors``: the one
    ``index`` uses (to chunk a file as it did), the one for previews. A stale query hit is skipped
    (``warn`` says so)."""
    from memsearch.errors import StaleChunkError

    index_redactor, preview_redactor = redactors
    found: list[Block] = []
    sizes = {"max_chunk_size": cfg.chunking.max_chunk_size, "overlap_lines": cfg.chunking.overlap_lines}

    def of_row(row: dict[str, Any]) -> list[Block]:
        return blocks_for_chunk(row, **sizes, redactor=index_redactor, shown=preview_redactor)

    for chunk_hash in chunk_hashes:
        found += of_row(memory.get_chunk(chunk_hash))
    if match:
        found += blocks_for_entries(memory_dirs, match, preview_redactor)
    if query:
        floor = forget_floor(cfg.search.min_relevance)
        hits = memory.search(query, top_k=top_k)
        strong = strong_hits(query, hits, floor)  # none: WeakMatchError, nothing is forgotten
        if len(strong) < len(hits):
            note(f"Left out {len(hits) - len(strong)} weak hit(s) (relevance below {floor:.2f}).")
        for hit in strong:
            try:  # a hit is redacted for showing; the file is compared with the row as stored
                blocks = of_row(memory.get_chunk(hit["chunk_hash"]))
            except StaleChunkError as exc:  # one stale hit must not stop the others
                warn(f"skipped a hit: {exc.one_line()}")
                continue
            found += [dataclasses.replace(b, relevance=float(hit["relevance"])) for b in blocks]
    if entry is not None:
        found += blocks_at(entry[0], entry[1], preview_redactor)
    unique = {(b.path, b.start, b.end): b for b in found}
    return [unique[k] for k in sorted(unique)]


# --- chunks -----------------------------------------------------------------------------------


def blocks_for_chunk(
    row: Mapping[str, Any], *, max_chunk_size: int, overlap_lines: int, redactor: Redactor, shown: Redactor
) -> list[Block]:
    """The blocks a stored chunk (a ``search``/``get_chunk`` row) names, checked against its file:
    the file must still hold that chunk where the index says (else StaleChunkError). ``redactor``
    is the one ``index`` uses (to chunk the file as it did), ``shown`` the one for previews."""
    from memsearch.engine.index_scan import gone_hint
    from memsearch.errors import SourceFileNotFoundError, StaleChunkError

    path = Path(str(row["source"]))
    try:
        lines = read_lines(path)
    except FileNotFoundError:
        raise SourceFileNotFoundError(f"{path} is gone from disk", hint=gone_hint(str(path))) from None
    start, end = int(row["start_line"]) - 1, int(row["end_line"])
    if not _still_there(lines, row, path, max_chunk_size, overlap_lines, redactor):
        raise StaleChunkError(
            f"{path} changed since chunk {row['chunk_hash']} was indexed",
            hint=f"`memsearch index {shlex.quote(str(path))}`, then search again for what to forget",
        )
    if is_journal(path):
        hit = [e for e in entries(lines) if e.start < end and e.end > start]
        if hit:
            return [_block(path, lines, e.start, e.end, e.heading, e.anchor, shown) for e in hit]
    return [_block(path, lines, start, end, str(row.get("heading") or ""), {}, shown)]


def _still_there(
    lines: Sequence[str],
    row: Mapping[str, Any],
    path: Path,
    max_chunk_size: int,
    overlap_lines: int,
    redactor: Redactor,
) -> bool:
    """Whether chunking the file now (as ``index`` does) gives the stored chunk at the same lines."""
    if _LONE_CR.search("".join(lines)):
        return False  # old Mac line breaks: the chunker numbers lines differently from this module
    content = str(row.get("content") or "")
    return any(
        (c.start_line, c.end_line, c.content) == (row["start_line"], row["end_line"], content)
        for c in chunk_text(encode(lines), str(path), max_chunk_size, overlap_lines, redactor)
    )


def chunk_text(
    raw: bytes, source: str, max_chunk_size: int, overlap_lines: int, redactor: Redactor
) -> list[Chunk]:
    """The chunks ``index`` makes of a file's bytes ``raw``: decoded as it decodes them, private
    spans and secrets out first as :func:`memsearch.redact.note_text` does (nothing is counted:
    forgetting logs nothing of the content)."""
    from memsearch.chunker import chunk_markdown
    from memsearch.scanner import decode_markdown

    text = decode_markdown(raw, source).text
    result = redactor.redact(text)
    if any(k != "private" for k in result.counts) and redactor.notes != "redact":
        if redactor.notes == "skip":
            return []
        result = redactor.redact(text, secrets=False)
    return chunk_markdown(result.text, source, max_chunk_size=max_chunk_size, overlap_lines=overlap_lines)


def _block(
    path: Path,
    lines: Sequence[str],
    start: int,
    end: int,
    heading: str,
    anchor: Mapping[str, str],
    redactor: Redactor,
) -> Block:
    return Block(
        path,
        start,
        end,
        block_digest(lines, start, end),
        heading=redactor.redact(heading).text,
        anchor=dict(anchor),
        preview=preview(lines[start:end], redactor),
    )


def preview(lines: Sequence[str], redactor: Redactor) -> str:
    """A short one-line preview of ``lines``: the bullets and prose (no headings, no anchors), with
    private spans and secrets replaced, clipped to :data:`PREVIEW_CHARS`."""
    text = redactor.redact("".join(lines)).text
    words = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "<!--")):
            continue
        words.append(stripped[2:] if stripped.startswith("- ") else stripped)
    joined = " / ".join(words)
    return joined if len(joined) <= PREVIEW_CHARS else joined[: PREVIEW_CHARS - 1].rstrip() + "…"
