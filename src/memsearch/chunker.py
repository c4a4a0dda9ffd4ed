"""Markdown → chunks, and the chunk-ID formula.

This module owns how a markdown document becomes the units that are embedded and searched: line
splitting, heading detection (fence-aware), section building, the "meaningful content" filter,
splitting of sections larger than ``max_chunk_size`` and the sentence splitter behind it, the
content hash, the chunk ID and the text cleaning applied before embedding. Everything here is a
pure function of its arguments: no I/O, so the indexer, ``expand`` and the tests all see exactly the
same line numbers and headings.

Chunks stay interchangeable with the original memsearch's: the same section rules (a section
starts at every heading), the same content strings, ``content_hash`` and chunk-ID formula, so an
index built by one implementation is reused by the other. Within that, the rules (how each differs
from the original, and what it changes, is in docs/compatibility.md):

* Lines inside fenced code blocks (```` ``` ```` or ``~~~``) are never headings: a ``# comment`` in
  a shell snippet is not a section. A fence closes on a line of the same character, at least as
  long, with nothing after it (CommonMark); an opening fence that is never closed is ordinary text,
  because journals are appended to all day and one stray fence must not merge every later turn
  into one section.
* Line endings are normalised (CRLF and lone CR become LF) first, so no ``\\r`` reaches a chunk and
  line numbers are the ones an editor shows. A final line terminator ends the last line rather than
  starting an empty one, so the last section's ``end_line`` is a line that exists. The chunk ID
  still hashes the range the original computes (``Chunk.id_end_line``): IDs are identity, so
  either tool reuses the other's index without re-embedding anything.
* A large section is split so that every chunk is at most ``max_chunk_size`` characters: the overlap
  carried into the next chunk is shortened until it fits, and a buffer holding only overlap lines
  already emitted is never emitted on its own.
* Chunk IDs are unique within a file: identical parts of one overlong line (same content, same line
  range, hence the same ID) are emitted once; the dropped copy would be the same search hit.
* A document that is nothing but headings (a note that is only
  ``# Renew the wildcard TLS certificate before 2026-12-20``) gives each heading as a chunk, where
  the original gives none, so the note could never be found. Only such documents change: any other
  document (a body anywhere, an anchor comment, a stray character) is chunked exactly as the
  original chunks it.
* The sentence splitter does not take the edge of its search window for the end of the text (so
  ``v1.2.3``, URLs, paths and e-mail addresses are not cut after a dot), and when a window holds no
  sentence end it cuts at the last whitespace before resorting to a hard cut mid-word.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field, replace

from memsearch.errors import ConfigValueError

__all__ = [
    "Chunk",
    "Heading",
    "chunk_markdown",
    "clean_content_for_embedding",
    "compute_chunk_id",
    "compute_content_hash",
    "find_headings",
    "section_bounds",
    "split_lines",
]

# A heading: 1–6 '#', whitespace, then at least one character. Same rule as the reference, so
# "#tag" and "####### x" are not headings; the title is the stripped remainder.
_HEADING_RE = re.compile(r"(#{1,6})\s+(.+)")
# A fence line: any indentation (fences nested in list items are indented), 3+ backticks or tildes.
_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_BLANK_RUN_RE = re.compile(r"\n{3,}")
# Sentence ends: ellipses, CJK full stops/marks, or ASCII . ! ? ; followed by whitespace, a CJK
# character, or the real end of the text. The caller never lets ``\Z`` fire at a window edge.
_CJK = "\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af"
_SENTENCE_END_RE = re.compile(rf"……|…|[。！？；]|[.!?;](?=[\s{_CJK}]|\Z)")
_LAST_SPACE_RE = re.compile(r"[\s\S]*\s")  # greedy: ends just after the last whitespace
_SPACES_RE = re.compile(r"\s*")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_MIN_MEANINGFUL_LEN = 2


@dataclass(frozen=True)
class Chunk:
    """One indexed unit: a section, or a part of a section larger than ``max_chunk_size``.

    ``start_line``/``end_line`` are 1-based and inclusive; ``heading_level`` is 0 for the preamble
    (text before the first heading). ``content_hash`` is derived from ``content`` when not given.
    """

    content: str
    source: str
    heading: str
    heading_level: int
    start_line: int
    end_line: int
    content_hash: str = field(default="", repr=False)
    #: The end line the chunk ID hashes when it differs from ``end_line`` (0: the same). The original
    #: counted a file's final line break as starting one more line, so its last chunk ends one past
    #: the file; the ID keeps that number so both tools agree on every ID.
    id_end_line: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.content_hash:
            object.__setattr__(self, "content_hash", compute_content_hash(self.content))

    def chunk_id(self, model: str) -> str:
        """This chunk's primary key for embeddings made by ``model``."""
        end = self.id_end_line or self.end_line
        return compute_chunk_id(self.source, self.start_line, end, self.content_hash, model)


@dataclass(frozen=True)
class Heading:
    """A heading line: 0-based line index, level 1–6, stripped title."""

    index: int
    level: int
    title: str


def compute_content_hash(content: str) -> str:
    """First 16 hex chars of SHA-256 of the UTF-8 content (the reference's ``content_hash``).

    A lone surrogate (which UTF-8 cannot encode) is hashed as its code point's 3 bytes instead of
    failing; every other text hashes exactly as in the reference.
    """
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def compute_chunk_id(source: str, start_line: int, end_line: int, content_hash: str, model: str) -> str:
    """The chunk's primary key, byte-compatible with the original memsearch (and OpenClaw).

    Line numbers and the model are part of the key on purpose: an index built with another model,
    or for text that moved, must not be mistaken for this one.
    """
    raw = f"markdown:{source}:{start_line}:{end_line}:{content_hash}:{model}"
    # A file name that is not valid UTF-8 reaches us with lone surrogates (os.fsdecode): hash them
    # rather than fail the file (identical to the reference for every valid name).
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def clean_content_for_embedding(text: str) -> str:
    """Text sent to the embedder: HTML comments removed, 3+ newlines collapsed, stripped.

    Anchor comments (session ids, transcript paths) are noise to a dense model; the stored content
    keeps them so BM25 can still find a chunk by session id.
    """
    text = _HTML_COMMENT_RE.sub("", text)
    return _BLANK_RUN_RE.sub("\n\n", text).strip()


def split_lines(text: str) -> list[str]:
    """Split text into the lines an editor shows.

    CRLF and lone CR count as line breaks; a final line break terminates the last line instead of
    starting an empty one; a leading UTF-8 BOM is dropped. Chunker and ``expand`` both use this, so
    their line numbers always agree.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _code_ranges(lines: list[str]) -> list[tuple[int, int]]:
    """Inclusive 0-based line ranges covered by closed fenced code blocks (fence lines included)."""
    fences: list[tuple[int, str, int, bool]] = []  # (index, char, length, can_close)
    for i, line in enumerate(lines):
        if "```" in line or "~~~" in line:
            m = _FENCE_RE.match(line)
            if m is None:
                continue
            marker, rest = m.group(1), m.group(2)
            if marker[0] == "`" and "`" in rest:  # a backtick info string cannot hold backticks
                continue
            fences.append((i, marker[0], len(marker), not rest.strip()))
    if not fences:
        return []
    # best_close[k][char]: longest closing fence of that char among fences[k:]. It tells in O(1)
    # whether an opener is ever closed, which keeps unclosed openers from costing a rescan each.
    best_close: list[dict[str, int]] = [{}] * (len(fences) + 1)
    running: dict[str, int] = {}
    for k in range(len(fences) - 1, -1, -1):
        _, char, length, can_close = fences[k]
        if can_close and length > running.get(char, 0):
            running = {**running, char: length}
        best_close[k] = running
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(fences):
        start, char, length, _ = fences[k]
        if best_close[k + 1].get(char, 0) < length:
            k += 1  # never closed: ordinary text
            continue
        j = k + 1
        while not (fences[j][1] == char and fences[j][3] and fences[j][2] >= length):
            j += 1
        ranges.append((start, fences[j][0]))
        k = j + 1
    return ranges


def find_headings(lines: list[str]) -> list[Heading]:
    """Every heading line, in order, skipping lines inside fenced code blocks."""
    candidates: list[Heading] = []
    for i, line in enumerate(lines):
        if line.startswith("#"):
            m = _HEADING_RE.fullmatch(line)
            if m is not None:
                candidates.append(Heading(i, len(m.group(1)), m.group(2).strip()))
    ranges = _code_ranges(lines)
    if not ranges or not candidates:
        return candidates
    starts = [r[0] for r in ranges]
    kept = []
    for h in candidates:
        r = bisect.bisect_right(starts, h.index) - 1
        if r < 0 or h.index > ranges[r][1]:
            kept.append(h)
    return kept


def section_bounds(n_lines: int, headings: list[Heading]) -> list[tuple[int, int, str, int]]:
    """Sections as ``(start, end, heading, level)`` with 0-based ``[start, end)`` line bounds.

    A preamble (level 0, heading ``""``) covers the lines before the first heading; every heading
    then starts a section that runs to the next heading of any level (reference behaviour).
    """
    sections: list[tuple[int, int, str, int]] = []
    first = headings[0].index if headings else n_lines
    if first > 0:
        sections.append((0, first, "", 0))
    for k, h in enumerate(headings):
        end = headings[k + 1].index if k + 1 < len(headings) else n_lines
        sections.append((h.index, end, h.title, h.level))
    return sections


def _split_long_text(text: str, max_size: int) -> list[str]:
    """Cut ``text`` into stripped, non-empty parts of at most ``max_size`` characters.

    Each cut falls after the last sentence end that fits in the window; failing that, at the last
    whitespace; failing that, at the window edge. Sentence ends are recognised with one character
    of look-ahead past the window, so a dot inside ``v1.2.3`` at the window edge is not one.
    """
    parts: list[str] = []
    pos, n = 0, len(text)
    while n - pos > max_size:
        limit = pos + max_size
        cut = pos
        for m in _SENTENCE_END_RE.finditer(text, pos, limit + 1):
            if m.end() > limit:
                break
            cut = m.end()
        if cut == pos:
            space = _LAST_SPACE_RE.match(text, pos + 1, limit + 1)
            cut = space.end() - 1 if space is not None else limit
        parts.append(text[pos:cut])
        pos = _SPACES_RE.match(text, cut).end()  # type: ignore[union-attr]  # \s* always matches
    parts.append(text[pos:])
    return [p for p in (part.strip() for part in parts) if p]


def _has_meaningful_content(body: str) -> bool:
    """At least two characters left once HTML comments are removed (drops heading-only sections)."""
    return len(_HTML_COMMENT_RE.sub("", body).strip()) >= _MIN_MEANINGFUL_LEN


class _Emitter:
    """Collects chunks for one file, bounded by ``max_size`` and with unique (range, content)."""

    def __init__(self, source: str, max_size: int) -> None:
        self.source = source
        self.max_size = max_size
        self.chunks: list[Chunk] = []
        self._seen: set[tuple[int, int, str]] = set()

    def emit(self, text: str, heading: str, level: int, start_line: int, end_line: int) -> None:
        text = text.strip()
        if not text:
            return
        parts = [text] if len(text) <= self.max_size else _split_long_text(text, self.max_size)
        for part in parts:
            key = (start_line, end_line, part)
            if key in self._seen:  # same range + same content would be the same chunk ID
                continue
            self._seen.add(key)
            self.chunks.append(Chunk(part, self.source, heading, level, start_line, end_line))


def _split_large_section(
    lines: list[str], heading: str, level: int, base: int, max_size: int, overlap: int, out: _Emitter
) -> None:
    """Greedy line packing for a section longer than ``max_size`` (the original's packing, without
    its overlap cascade: see the module docstring).

    Lines accumulate until the buffer reaches ``max_size``; at a blank line the buffer (blank line
    included) is emitted, otherwise the buffer without the newest line is. The next buffer starts
    with up to ``overlap`` trailing lines of the previous one — fewer if they would not fit beside
    the new line — and a buffer is only emitted if it holds a non-blank line not yet emitted. A
    single line of ``max_size`` or more is cut by the sentence splitter; all its parts carry that
    one line's number.
    """
    n = len(lines)
    buf: list[str] = []
    buf_len = -1  # len("\n".join(buf)); -1 for the empty buffer
    buf_start = 0  # section-relative index of buf[0]
    fresh_from = 0  # lines before this index are already inside an emitted chunk

    def has_fresh(end: int) -> bool:
        return any(lines[j].strip() for j in range(max(fresh_from, buf_start), end + 1))

    def flush(end: int) -> None:
        nonlocal fresh_from
        if has_fresh(end):
            out.emit("\n".join(buf), heading, level, base + buf_start + 1, base + end + 1)
        fresh_from = end + 1

    def split_single(i: int) -> None:
        nonlocal fresh_from
        out.emit(lines[i], heading, level, base + i + 1, base + i + 1)
        fresh_from = i + 1

    for i, line in enumerate(lines):
        buf.append(line)
        buf_len += len(line) + 1
        if buf_len < max_size:
            if i == n - 1:
                flush(i)
                buf = []
            continue
        if not line.strip() and i + 1 < n:
            # Paragraph break: the buffer, blank line included, becomes a chunk.
            flush(i)
            buf = buf[len(buf) - overlap :] if overlap > 0 else []
            buf_len = len("\n".join(buf)) if buf else -1
            buf_start = i + 1 - len(buf)
            continue
        if len(buf) == 1:
            split_single(i)
            buf, buf_len, buf_start = [], -1, i + 1
            continue
        buf.pop()
        flush(i - 1)
        keep = buf[len(buf) - overlap :] if overlap > 0 else []
        while keep and len("\n".join([*keep, line])) >= max_size:
            keep = keep[1:]
        if len(line) >= max_size:
            split_single(i)
            buf, buf_len, buf_start = [], -1, i + 1
            continue
        buf = [*keep, line]
        buf_len = len("\n".join(buf))
        buf_start = i - len(keep)
        if i == n - 1:
            flush(i)
            buf = []
    if buf:
        flush(n - 1)


def _only_headings(lines: list[str], sections: list[tuple[int, int, str, int]]) -> bool:
    """Whether every line that is not blank is a heading: a note of headings alone. (An anchor
    comment or a stray character beside them keeps the original's rule: a journal entry whose
    summary came out empty is no memory.)"""
    heading_lines = {start for start, _end, _heading, level in sections if level}
    return bool(heading_lines) and all(i in heading_lines or not line.strip() for i, line in enumerate(lines))


def _emit_sections(
    lines: list[str],
    sections: list[tuple[int, int, str, int]],
    out: _Emitter,
    overlap: int,
    *,
    whole: bool,
) -> None:
    """Emit each section with meaningful content: in its body (the heading line not counted: the
    original's rule), or, with ``whole``, in its text, heading included (a note of headings alone)."""
    for start, end, heading, level in sections:
        section_lines = lines[start:end]
        counted = section_lines if whole or not level else section_lines[1:]
        if not _has_meaningful_content("\n".join(counted)):
            continue
        section_text = "\n".join(section_lines).strip()
        if len(section_text) <= out.max_size:
            out.emit(section_text, heading, level, start + 1, end)
        else:
            _split_large_section(section_lines, heading, level, start, out.max_size, overlap, out)


def chunk_markdown(
    text: str, source: str = "", *, max_chunk_size: int = 1500, overlap_lines: int = 2
) -> list[Chunk]:
    """Split a markdown document into chunks, one per heading section (large ones split further).

    Sections without meaningful content (a heading alone, or only an anchor comment) produce no
    chunk, unless the document is nothing but headings: then each heading is a chunk of its own
    (a note that is only ``# Renew the TLS certificate before 2026-12-20`` is found). Each
    chunk's ``content`` is its lines joined and stripped; sub-chunks of a large section keep the
    section's heading and level. See the module docstring for where this differs from the
    original memsearch.
    """
    if max_chunk_size < 1:
        raise ConfigValueError(
            f"max_chunk_size must be at least 1, got {max_chunk_size}",
            hint="set a positive size (the default is 1500 characters)",
        )
    overlap_lines = max(0, overlap_lines)
    if _SURROGATE_RE.search(text):  # only from Python callers: decoded files never hold them
        # Lone surrogates cannot be stored (Milvus takes UTF-8); U+FFFD, as the store writes them.
        text = _SURROGATE_RE.sub("\ufffd", text)
    lines = split_lines(text)
    sections = section_bounds(len(lines), find_headings(lines))
    out = _Emitter(source, max_chunk_size)
    _emit_sections(lines, sections, out, overlap_lines, whole=False)
    if not out.chunks and _only_headings(lines, sections):  # (see the module docstring)
        _emit_sections(lines, sections, out, overlap_lines, whole=True)
    if not text.endswith(("\n", "\r")):
        return out.chunks
    last = len(lines)  # the reference saw one more (empty) line after a final line break
    return [replace(c, id_end_line=last + 1) if c.end_line == last else c for c in out.chunks]
