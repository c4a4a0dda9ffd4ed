"""Chunker: the reference behaviours we keep and the deliberate differences.

Tests for a fix say in a comment what the original produced, so it is clear why they would fail
on it.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.chunker import (
    Chunk,
    _split_long_text,
    chunk_markdown,
    clean_content_for_embedding,
    compute_chunk_id,
    compute_content_hash,
    find_headings,
    split_lines,
)
from memsearch.errors import ConfigValueError

EXAMPLE = "# Title\nintro\n\n## A\ntext a\n\n### A1\nsub\n\n## B\ntext b\n"

# The benchmark corpus generator, part of the repository (see evaluation/README.md).
GEN_CORPUS = Path(__file__).resolve().parents[1] / "evaluation" / "gen_corpus.py"


def _summary(chunks: list[Chunk]) -> list[tuple[str, int, int, int, str]]:
    return [(c.heading, c.heading_level, c.start_line, c.end_line, c.content) for c in chunks]


def _check_invariants(text: str, chunks: list[Chunk], max_size: int) -> None:
    """Properties every chunking must have: bounded, unique IDs, ranges inside the file, and each
    chunk's content is its claimed lines (stripped), or a piece of its one overlong line."""
    lines = split_lines(text)
    ids = [compute_chunk_id("f.md", c.start_line, c.end_line, c.content_hash, "m") for c in chunks]
    assert len(set(ids)) == len(ids)
    for c in chunks:
        assert 0 < len(c.content) <= max_size
        assert "\r" not in c.content
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        claimed = "\n".join(lines[c.start_line - 1 : c.end_line])
        if c.content != claimed.strip():
            assert c.start_line == c.end_line and c.content in claimed
            assert len(claimed) > max_size


# --- reference behaviours kept ------------------------------------------------------------------


def test_reference_example_sections() -> None:
    chunks = chunk_markdown(EXAMPLE, "notes.md")
    assert _summary(chunks) == [
        ("Title", 1, 1, 3, "# Title\nintro"),
        ("A", 2, 4, 6, "## A\ntext a"),
        ("A1", 3, 7, 9, "### A1\nsub"),
        # The reference reported 10-12: line 12 is the "line" after the final newline.
        ("B", 2, 10, 11, "## B\ntext b"),
    ]
    assert all(c.source == "notes.md" for c in chunks)


def test_heading_rules() -> None:
    lines = ["# One", "####### seven", "#tag", "##\tTabbed  ", "###### six", "#  ", "# "]
    assert [(h.index, h.level, h.title) for h in find_headings(lines)] == [
        (0, 1, "One"),
        (3, 2, "Tabbed"),
        (4, 6, "six"),
        (5, 1, ""),  # "#" + spaces is a heading with an empty title, as in the reference
    ]


def test_preamble_only_document_is_one_level_zero_chunk() -> None:
    chunks = chunk_markdown("just some text\nand more\n", "p.md")
    assert _summary(chunks) == [("", 0, 1, 2, "just some text\nand more")]


def test_preamble_before_first_heading() -> None:
    chunks = chunk_markdown("intro text\n\n# H\nbody\n")
    assert _summary(chunks) == [("", 0, 1, 2, "intro text"), ("H", 1, 3, 4, "# H\nbody")]


@pytest.mark.parametrize("text", ["", "\n", "\n\n\n", "   \n\t\n"])
def test_empty_documents_have_no_chunks(text: str) -> None:
    assert chunk_markdown(text) == []


def test_heading_only_and_anchor_only_sections_are_dropped() -> None:
    text = (
        "# 2026-03-25\n\n## Session 15:24\n\n### 15:24\n"
        "<!-- session:s turn:t transcript:/x.jsonl -->\n\n### 15:30\n"
        "<!-- session:s turn:u transcript:/x.jsonl -->\n- did a thing\n"
    )
    chunks = chunk_markdown(text)
    assert _summary(chunks) == [
        (
            "15:30",
            3,
            8,
            10,
            "### 15:30\n<!-- session:s turn:u transcript:/x.jsonl -->\n- did a thing",
        )
    ]


@pytest.mark.parametrize("size", [0, -5])
def test_max_chunk_size_must_be_positive(size: int) -> None:
    with pytest.raises(ConfigValueError) as info:
        chunk_markdown("# H\nbody\n", max_chunk_size=size)
    assert isinstance(info.value, ValueError) and info.value.hint


def test_one_character_body_is_not_meaningful() -> None:
    assert chunk_markdown("# H\nx\n") == []
    assert len(chunk_markdown("# H\nxy\n")) == 1


# --- a note of headings alone (issue 38) ---------------------------------------------------------


def test_a_note_that_is_only_a_heading_is_a_chunk() -> None:
    """The original gives no chunk for it, so the note could never be found."""
    text = "# Renew the wildcard TLS certificate before 2026-12-20\n"
    chunks = chunk_markdown(text, "todo.md")
    assert _summary(chunks) == [
        ("Renew the wildcard TLS certificate before 2026-12-20", 1, 1, 1, text.strip())
    ]
    # the ID is the original's formula over that range and content (its final line break counted)
    assert chunks[0].chunk_id("m") == compute_chunk_id(
        "todo.md", 1, 2, compute_content_hash(text.strip()), "m"
    )


def test_a_document_of_headings_alone_gives_each_heading() -> None:
    text = "# Outline\n\n## Renew certificates\n### Rotate the keys\n"
    assert _summary(chunk_markdown(text)) == [
        ("Outline", 1, 1, 2, "# Outline"),
        ("Renew certificates", 2, 3, 3, "## Renew certificates"),
        ("Rotate the keys", 3, 4, 4, "### Rotate the keys"),
    ]


@pytest.mark.parametrize(
    ("text", "headings"),
    [
        ("# Title\n\n## Empty\n\n## Body\nsome text\n", ["Body"]),  # a body beside headings alone
        ("### 08:00\n<!-- session:s turn:t transcript:/x.jsonl -->\n", []),  # an empty captured turn
        ("# H\nx\n", []),  # a stray character
    ],
)
def test_any_other_document_is_chunked_as_the_original_chunks_it(text: str, headings: list[str]) -> None:
    """Headings without a body give no chunk beside anything else, so every other document's chunks
    (and so their IDs) are exactly the original's (its rule: a section needs two characters of
    body, comments and heading lines not counted)."""
    assert [c.heading for c in chunk_markdown(text)] == headings


def test_content_hash_depends_on_content_only() -> None:
    a = chunk_markdown("# Same\nbody text\n", "a.md")[0]
    b = chunk_markdown("# Same\nbody text\n", "b.md")[0]
    assert a.content_hash == b.content_hash == compute_content_hash("# Same\nbody text")
    assert len(a.content_hash) == 16


def test_chunk_dataclass() -> None:
    c = Chunk("hello", "s.md", "H", 1, 1, 2)
    assert c.content_hash == compute_content_hash("hello")
    assert "content_hash" not in repr(c)
    assert Chunk("hello", "s.md", "H", 1, 1, 2, content_hash="given").content_hash == "given"
    with pytest.raises(AttributeError):
        c.content = "x"  # type: ignore[misc]


def test_chunk_id_reference_vector_and_sensitivity() -> None:
    base = ("test.md", 1, 5, "hash", "model")
    assert compute_chunk_id(*base) == "57f026237c0da79b"
    variants = [
        ("other.md", 1, 5, "hash", "model"),
        ("test.md", 2, 5, "hash", "model"),
        ("test.md", 1, 6, "hash", "model"),
        ("test.md", 1, 5, "hash2", "model"),
        ("test.md", 1, 5, "hash", "model2"),
    ]
    ids = {compute_chunk_id(*v) for v in variants} | {compute_chunk_id(*base)}
    assert len(ids) == 6
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


def test_clean_content_for_embedding_pinned() -> None:
    text = "Header\n<!-- first comment -->\n<!-- second comment -->\n\nBody text"
    assert clean_content_for_embedding(text) == "Header\n\nBody text"
    assert clean_content_for_embedding("a<!--\nmulti\nline\n-->b\n\n\n\n\nc  ") == "ab\n\nc"


def test_large_section_is_split_and_keeps_its_heading() -> None:
    body = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(10))
    text = f"## Big\n{body}\n"
    chunks = chunk_markdown(text, max_chunk_size=500)
    assert len(chunks) > 3
    assert all(c.heading == "Big" and c.heading_level == 2 for c in chunks)
    _check_invariants(text, chunks, 500)


def test_paragraph_overlap_carries_the_previous_lines() -> None:
    a1, a2, b1, b2, c1, c2 = (ch * 40 for ch in "abcdef")
    text = f"# P\n{a1}\n{a2}\n\n{b1}\n{b2}\n\n{c1}\n{c2}"
    chunks = chunk_markdown(text, max_chunk_size=100, overlap_lines=2)
    # Greedy line packing as in the reference: each chunk starts with the last two lines of
    # the previous one (a blank line counts as a line).
    assert [(c.start_line, c.end_line, c.content) for c in chunks] == [
        (1, 4, f"# P\n{a1}\n{a2}"),
        (3, 5, f"{a2}\n\n{b1}"),
        (4, 7, f"{b1}\n{b2}"),
        (6, 8, f"{b2}\n\n{c1}"),
        (7, 9, f"{c1}\n{c2}"),
    ]
    no_overlap = chunk_markdown(text, max_chunk_size=100, overlap_lines=0)
    assert [(c.start_line, c.end_line) for c in no_overlap] == [(1, 4), (5, 7), (8, 9)]


def test_rolled_back_final_line_is_kept() -> None:
    text = "# H\n" + "a" * 60 + "\n" + "b" * 60
    chunks = chunk_markdown(text, max_chunk_size=100, overlap_lines=0)
    assert [(c.start_line, c.end_line, c.content) for c in chunks] == [
        (1, 2, "# H\n" + "a" * 60),
        (3, 3, "b" * 60),
    ]


def test_long_line_after_forced_split_stays_bounded() -> None:
    text = "# H\nshort line\n" + "word " * 100 + "\nend line here\n"
    chunks = chunk_markdown(text, max_chunk_size=80)
    _check_invariants(text, chunks, 80)
    assert chunks[-1].content.endswith("end line here")


# --- sentence splitter (for lines longer than a chunk) --------------------------------------------


def test_split_cjk_full_stop() -> None:
    text = "这是第一句话。这是第二句话。这是第三句话。"
    assert _split_long_text(text, 8) == ["这是第一句话。", "这是第二句话。", "这是第三句话。"]


def test_split_cjk_ellipsis_and_fullwidth_semicolon() -> None:
    assert _split_long_text("等一下……然后继续说话吧", 8) == ["等一下……", "然后继续说话吧"]
    assert _split_long_text("第一部分；第二部分；第三部分", 6) == ["第一部分；", "第二部分；", "第三部分"]


def test_split_mixed_cjk_and_ascii() -> None:
    text = "我们用 Milvus 存储。It works great! 然后我们测试了 BM25 检索。再写文档。"
    parts = _split_long_text(text, 20)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    assert all(len(p) <= 20 for p in parts)
    assert all(p.endswith(("。", "!")) for p in parts[:-1])


def test_split_ascii_sentence_ends() -> None:
    assert _split_long_text("One two. Three four! Five six? Seven", 12) == [
        "One two.",
        "Three four!",
        "Five six?",
        "Seven",
    ]


@pytest.mark.parametrize(
    "token",
    ["v1.2.3", "https://example.com/a.b/c.html", "src/memsearch/chunker.py", "someone@example.org"],
)
def test_dots_inside_tokens_are_not_sentence_ends(token: str) -> None:
    text = f"First sentence here. Then {token} appears in the text. Last words"
    for max_size in range(len(token) + 6, len(text)):
        parts = _split_long_text(text, max_size)
        assert all(len(p) <= max_size for p in parts)
        assert any(token in p for p in parts), (max_size, parts)


def test_window_edge_is_not_end_of_string() -> None:
    # The reference searched with endpos=max_size, so "$" matched at the window edge and the dot
    # of "v1." ending the window counted as a sentence end: ["Done. Use v1.", "2.3 now"].
    assert _split_long_text("Done. Use v1.2.3 now", 13) == ["Done.", "Use v1.2.3", "now"]


def test_hard_cut_without_boundaries_matches_reference() -> None:
    assert _split_long_text("abcdefghi.jklmnop", 10) == ["abcdefghi.", "jklmnop"]
    assert _split_long_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_split_prefers_whitespace_over_mid_word_cut() -> None:
    assert _split_long_text("alpha beta gamma delta", 12) == ["alpha beta", "gamma delta"]


# --- fix 1: fenced code blocks --------------------------------------------------------------------


def test_comment_lines_in_code_fences_are_not_headings() -> None:
    text = (
        "## Setup\nRun this:\n```bash\n# install deps\npip install x\n```\n"
        "~~~python\n## not a heading either\n~~~\nDone.\n## Next\nmore text\n"
    )
    chunks = chunk_markdown(text)
    # The reference split at "# install deps" and "## not a heading either".
    assert [(c.heading, c.start_line, c.end_line) for c in chunks] == [("Setup", 1, 10), ("Next", 11, 12)]
    assert "# install deps" in chunks[0].content


def test_fence_closes_only_with_same_char_and_enough_length() -> None:
    text = "# H\n````\n```\n# inside\n~~~~~\n# still inside\n````\n# After\ntext here\n"
    assert [h.title for h in find_headings(split_lines(text))] == ["H", "After"]


def test_fence_with_info_string_does_not_close() -> None:
    text = "# H\n```\n```python\n# inside\n```\n# After\nbody\n"
    assert [h.title for h in find_headings(split_lines(text))] == ["H", "After"]


def test_indented_fence_in_list_item() -> None:
    text = "# H\n- step:\n    ```sh\n    # comment\n    ```\n# After\nbody\n"
    assert [h.title for h in find_headings(split_lines(text))] == ["H", "After"]


def test_unclosed_fence_does_not_swallow_later_headings() -> None:
    # A deliberate choice (module docstring): a journal must not merge every later turn into one
    # section because one summary opened a fence and never closed it.
    text = "### 09:00\n```\nstray fence\n\n### 09:05\nsecond turn\n"
    assert [c.heading for c in chunk_markdown(text)] == ["09:00", "09:05"]


# --- fix 2: no overlap cascade --------------------------------------------------------------------


def test_overlap_never_exceeds_max_and_no_fragments_share_a_range() -> None:
    lines = [chr(ord("a") + i) * 45 for i in range(8)]
    text = "\n".join(lines)
    chunks = chunk_markdown(text, max_chunk_size=100, overlap_lines=2)
    # The reference kept two 45-char overlap lines plus the new one (137 chars), then hard-cut that
    # buffer into a 100-char chunk and a short fragment with the same line range, over and over.
    _check_invariants(text, chunks, 100)
    ranges = [(c.start_line, c.end_line) for c in chunks]
    assert len(set(ranges)) == len(ranges)
    assert ranges == [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]


def test_overlap_is_shortened_to_fit_long_lines() -> None:
    a, b, c = "a" * 60, "b" * 60, "c" * 60
    chunks = chunk_markdown(f"{a}\n{b}\n{c}", max_chunk_size=100, overlap_lines=2)
    assert [(x.start_line, x.end_line, x.content) for x in chunks] == [(1, 1, a), (2, 2, b), (3, 3, c)]


def test_no_chunk_is_only_overlap() -> None:
    # A paragraph break right after a split used to flush the carried overlap lines on their own.
    text = "\n".join(["x" * 49, "y" * 49, "", "z" * 95, "", "w" * 30])
    chunks = chunk_markdown(text, max_chunk_size=100, overlap_lines=2)
    _check_invariants(text, chunks, 100)
    for earlier, later in itertools.pairwise(chunks):
        assert later.content not in earlier.content


# --- fix 3: unique chunk IDs ----------------------------------------------------------------------


def test_identical_parts_of_one_line_get_one_chunk() -> None:
    # The reference emitted "zzzzzzzzzz" three times with lines 1-1: three equal chunk IDs.
    chunks = chunk_markdown("z" * 35, "dup.md", max_chunk_size=10)
    assert [(c.start_line, c.end_line, c.content) for c in chunks] == [(1, 1, "z" * 10), (1, 1, "z" * 5)]
    _check_invariants("z" * 35, chunks, 10)


def test_repeated_text_under_a_heading_has_unique_ids() -> None:
    text = "# H\n" + "abc. " * 200 + "\n" + "abc. " * 200 + "\n"
    chunks = chunk_markdown(text, max_chunk_size=50)
    _check_invariants(text, chunks, 50)


# --- fix 4: line endings --------------------------------------------------------------------------


def test_crlf_leaves_no_carriage_returns() -> None:
    text = "# A\r\ntext a\r\n\r\n# B\r\ntext b\r\n"
    chunks = chunk_markdown(text)
    # The reference kept "\r" in content and ended B at line 6 (past the file's 5 lines).
    assert _summary(chunks) == [("A", 1, 1, 3, "# A\ntext a"), ("B", 1, 4, 5, "# B\ntext b")]


def test_lone_carriage_returns_are_line_breaks() -> None:
    chunks = chunk_markdown("# A\rtext a\r# B\rtext b")
    assert _summary(chunks) == [("A", 1, 1, 2, "# A\ntext a"), ("B", 1, 3, 4, "# B\ntext b")]


@pytest.mark.parametrize("ending", ["", "\n", "\r\n"])
def test_last_section_ends_on_the_last_real_line(ending: str) -> None:
    text = f"# A\nfirst\n# B\nlast line{ending}"
    assert chunk_markdown(text)[-1].end_line == 4


def test_trailing_blank_lines_still_exist() -> None:
    # Blank lines are real lines; only the final line terminator does not start a new line.
    assert chunk_markdown("# A\ntext\n\n\n")[-1].end_line == 4


def test_crlf_and_lf_give_identical_chunks() -> None:
    lf = EXAMPLE
    assert chunk_markdown(lf.replace("\n", "\r\n")) == chunk_markdown(lf)


def test_utf8_bom_does_not_hide_the_first_heading() -> None:
    assert chunk_markdown("\ufeff# Title\nbody\n")[0].heading == "Title"


# --- property checks ------------------------------------------------------------------------------


def test_randomised_documents_keep_invariants() -> None:
    rng = random.Random(20260901)
    words = ["alpha", "v1.2.3", "https://x.org/a.b", "中文句子。", "end.", "x" * 40, "", "# h", "## s", "```"]
    for _ in range(400):
        lines = [
            " ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 40))
        ]
        text = rng.choice(["\n", "\r\n", "\r"]).join(lines) + rng.choice(["", "\n"])
        max_size = rng.randint(5, 200)
        chunks = chunk_markdown(text, max_chunk_size=max_size, overlap_lines=rng.randint(0, 3))
        _check_invariants(text, chunks, max_size)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The benchmark corpus (2,000 journal turns in 60 daily files), generated once."""
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run([sys.executable, str(GEN_CORPUS), str(out)], check=True, capture_output=True)
    return sorted((out / "memory").glob("*.md"))


def test_corpus_has_one_chunk_per_turn(corpus: list[Path]) -> None:
    total = 0
    for path in corpus:
        text = path.read_text(encoding="utf-8")
        chunks = chunk_markdown(text, str(path))
        turns = [line for line in split_lines(text) if re.fullmatch(r"### \d\d:\d\d", line)]
        assert [c.heading for c in chunks] == [t[4:] for t in turns]
        assert all(c.heading_level == 3 and c.content.startswith("### ") for c in chunks)
        _check_invariants(text, chunks, 1500)
        total += len(chunks)
    assert total == 2000


def test_corpus_chunks_fast(corpus: list[Path]) -> None:
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in corpus]
    started = time.perf_counter()
    count = sum(len(chunk_markdown(text, source)) for source, text in texts)
    elapsed = time.perf_counter() - started
    assert count == 2000
    assert elapsed < 1.0, f"chunking 2,000 turns took {elapsed:.2f}s"


def test_chunk_id_hashes_the_original_range_for_the_last_chunk() -> None:
    """The original counts a final line break as one more (empty) line, so its last chunk ends one
    past the file. We display the real last line but hash the original's number: the IDs, and so
    an index built by either tool, stay the same (measured on journals: every ID equal)."""
    text = "# A\nalpha body\n\n# B\nbeta body\n"
    first, last = chunk_markdown(text, "m.md")
    assert (first.start_line, first.end_line, first.id_end_line) == (1, 3, 0)
    assert (last.start_line, last.end_line, last.id_end_line) == (4, 5, 6)
    assert (
        last.chunk_id("m")
        == hashlib.sha256(f"markdown:m.md:4:6:{last.content_hash}:m".encode()).hexdigest()[:16]
    )
    assert first.chunk_id("m") == compute_chunk_id("m.md", 1, 3, first.content_hash, "m")
    # Without a final line break the original's range is the real one.
    (only,) = chunk_markdown("# B\nbeta body", "m.md")
    assert only.id_end_line == 0 and only.chunk_id("m") == compute_chunk_id(
        "m.md", 1, 2, only.content_hash, "m"
    )
