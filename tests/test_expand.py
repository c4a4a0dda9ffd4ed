"""expand: hash validation, anchors of every platform, and the three expansion
modes with their fixes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsearch.chunker import Chunk, chunk_markdown, split_lines
from memsearch.engine.expand import (
    Anchor,
    Expansion,
    InvalidExpandOptionError,
    StaleChunkError,
    expand_chunk,
    parse_anchor,
    validate_chunk_hash,
)
from memsearch.errors import InvalidChunkHashError, MemSearchError, SourceFileNotFoundError

EXAMPLE = "# Title\nintro\n\n## A\ntext a\n\n### A1\nsub\n\n## B\ntext b\n"

# The benchmark corpus generator, part of the repository (see evaluation/README.md).
GEN_CORPUS = Path(__file__).resolve().parents[1] / "evaluation" / "gen_corpus.py"

ANCHORS = {
    "claude-code": (
        "<!-- session:sess-1 turn:u-1 transcript:/tmp/ccx/sess-1.jsonl -->",
        {"session": "sess-1", "turn": "u-1", "transcript": "/tmp/ccx/sess-1.jsonl"},
    ),
    "codex": (
        "<!-- session:019a-codex rollout:/home/u/.codex/sessions/rollout-1.jsonl -->",
        {"session": "019a-codex", "rollout": "/home/u/.codex/sessions/rollout-1.jsonl"},
    ),
    "codex-empty-rollout": (
        "<!-- session:019a-codex rollout: -->",
        {"session": "019a-codex", "rollout": ""},
    ),
    "openclaw": (
        "<!-- session:oc-7 transcript:/home/u/.openclaw/agents/main/sessions/oc-7.jsonl -->",
        {"session": "oc-7", "transcript": "/home/u/.openclaw/agents/main/sessions/oc-7.jsonl"},
    ),
    "opencode": (
        "<!-- session:ses_abc turn:msg_def db:/home/u/.local/share/opencode/opencode.db -->",
        {"session": "ses_abc", "turn": "msg_def", "db": "/home/u/.local/share/opencode/opencode.db"},
    ),
    "opencode-legacy": (
        "<!-- session:ses_old db:/home/u/.local/share/opencode/opencode.db -->",
        {"session": "ses_old", "db": "/home/u/.local/share/opencode/opencode.db"},
    ),
    "dsh": (
        "<!-- session:d-1 turn:12 db:/home/u/.dsh/sessions/d-1.json -->",
        {"session": "d-1", "turn": "12", "db": "/home/u/.dsh/sessions/d-1.json"},
    ),
}


def _row(chunk: Chunk, source: Path | str, chunk_hash: str = "00aa") -> dict[str, Any]:
    """A store row as the CLI hands it over."""
    return {
        "chunk_hash": chunk_hash,
        "source": str(source),
        "heading": chunk.heading,
        "heading_level": chunk.heading_level,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "content": chunk.content,
    }


def _file(tmp_path: Path, text: str, name: str = "notes.md") -> tuple[Path, dict[str, Chunk]]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path, {c.heading: c for c in chunk_markdown(text, str(path))}


def _lines(expansion: Expansion, path: Path) -> str:
    """The lines the expansion claims, read independently of the code under test."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[expansion.start_line - 1 : expansion.end_line])


# --- chunk hashes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("57f026237c0da79b", "57f026237c0da79b"), ("  57F026237C0DA79B\n", "57f026237c0da79b"), ("a", "a")],
)
def test_valid_chunk_hashes(value: str, expected: str) -> None:
    assert validate_chunk_hash(value) == expected


@pytest.mark.parametrize("value", ["", "   ", "xyz", '57f0" or chunk_hash != "', "0" * 65, "57f0 26"])
def test_invalid_chunk_hashes(value: str) -> None:
    with pytest.raises(InvalidChunkHashError) as info:
        validate_chunk_hash(value)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == f"'{value}' is not a chunk hash: expected hexadecimal like 57f026237c0da79b"
    assert info.value.hint == (
        "copy it from the `Chunk:` line of a `memsearch search` hit (chunk_hash in --json-output)"
    )


# --- anchors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ANCHORS))
def test_every_anchor_kind(name: str) -> None:
    comment, fields = ANCHORS[name]
    anchor = parse_anchor(f"### 15:24\n{comment}\n- did things\n")
    assert anchor is not None
    assert anchor.kind == name.replace("-empty-rollout", "")
    assert anchor.to_dict() == fields
    assert list(anchor.to_dict()) == [
        k for k in ("session", "turn", "transcript", "rollout", "db") if k in fields
    ]


def test_claude_anchor_dict_is_the_reference_shape() -> None:
    anchor = parse_anchor(ANCHORS["claude-code"][0])
    assert anchor == Anchor("claude-code", "sess-1", turn="u-1", transcript="/tmp/ccx/sess-1.jsonl")
    assert list(anchor.to_dict()) == ["session", "turn", "transcript"]


def test_anchor_fields_in_any_order() -> None:
    anchor = parse_anchor("<!--transcript:/t.jsonl   session:s\tturn:u-->")
    assert anchor is not None and anchor.kind == "claude-code"
    assert anchor.to_dict() == {"session": "s", "turn": "u", "transcript": "/t.jsonl"}
    # The reference's fixed-order regex only knew this one ordering and only Claude's fields.
    assert parse_anchor("<!-- db:/x.db turn:7 session:d -->") == Anchor("dsh", "d", turn="7", db="/x.db")


def test_first_anchor_wins_and_prose_comments_are_skipped() -> None:
    text = (
        "<!-- TODO: tidy this -->\n<!-- just a note -->\n"
        "<!-- session:first rollout:/r1 -->\n<!-- session:second rollout:/r2 -->"
    )
    anchor = parse_anchor(text)
    assert anchor is not None and anchor.session == "first"


@pytest.mark.parametrize(
    "comment",
    [
        "<!-- turn:u transcript:/t -->",  # no session
        "<!-- session:s turn:u -->",  # no platform has exactly these
        "<!-- session:s session:t rollout:/r -->",  # duplicate field
        "<!-- session: turn:u transcript:/t -->",  # empty session
        "<!-- session:s turn:u transcript:/t and more words -->",
        "no comment at all session:s turn:u transcript:/t",
    ],
)
def test_not_anchors(comment: str) -> None:
    assert parse_anchor(comment) is None


def test_unknown_extra_field_is_tolerated() -> None:
    anchor = parse_anchor("<!-- session:s turn:u transcript:/t agent:main -->")
    assert anchor is not None and anchor.kind == "claude-code"


def test_an_openclaw_anchor_with_its_turn_is_openclaws() -> None:
    """OpenClaw writes ``session transcript turn`` (the fields of Claude Code's anchor): its
    transcript, an OpenClaw agent's database or session file, tells the two apart."""
    db = "/home/u/.openclaw/agents/main/agent/openclaw-agent.sqlite"
    anchor = parse_anchor(f"<!-- session:oc-7 transcript:{db} turn:evt-3 -->")
    assert anchor is not None and anchor.kind == "openclaw"
    jsonl = "/home/u/.openclaw/agents/main/sessions/oc-7.jsonl"
    assert parse_anchor(f"<!-- session:oc-7 transcript:{jsonl} turn:e -->").kind == "openclaw"  # type: ignore[union-attr]
    claude = "/home/u/.claude/projects/-home-u-app/s.jsonl"
    assert parse_anchor(f"<!-- session:s turn:u transcript:{claude} -->").kind == "claude-code"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "host"),
    [
        ({"session": "s", "turn": "u", "transcript": "/h/.claude/projects/p/s.jsonl"}, "claude-code"),
        ({"session": "s", "rollout": "/h/.codex/sessions/r.jsonl", "turn_id": "t"}, "codex"),
        ({"session": "s", "rollout": ""}, "codex"),
        ({"session": "ses_1", "turn": "msg_1", "db": "/h/.local/share/opencode/opencode.db"}, "opencode"),
        ({"session": "ses_1", "db": "/h/opencode.db"}, "opencode"),
        (
            {
                "session": "s",
                "transcript": "/h/.openclaw/agents/main/agent/openclaw-agent.sqlite",
                "turn": "e",
            },
            "openclaw",
        ),
        ({"session": "s", "transcript": "/h/.openclaw/agents/main/sessions/s.jsonl"}, "openclaw"),
        ({"session": "session-1", "turn": "3", "db": "/h/.dsh/sessions/session-1.jsonl.zst"}, "dsh"),
        ({"via": "mcp"}, "mcp"),
        ({}, ""),
        ({"session": "s", "turn": "u"}, ""),
    ],
)
def test_the_host_that_wrote_an_anchor(fields: dict[str, str], host: str) -> None:
    from memsearch.engine.expand import anchor_host

    assert anchor_host(fields) == host


def test_windows_paths_keep_their_drive_colon() -> None:
    anchor = parse_anchor(r"<!-- session:s turn:u transcript:C:\Users\me\s.jsonl -->")
    assert anchor is not None and anchor.transcript == r"C:\Users\me\s.jsonl"


# --- modes --------------------------------------------------------------------------------------------


def test_section_mode_starts_at_the_chunks_own_heading(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    a = expand_chunk(_row(chunks["A"], path))
    # The reference started one section early: lines 1-9, "# Title" included.
    assert (a.start_line, a.end_line) == (4, 9)  # up to the next heading, as the original
    assert a.content == "## A\ntext a\n\n### A1\nsub\n"  # subsections included
    b = expand_chunk(_row(chunks["B"], path))
    assert (b.start_line, b.end_line, b.content) == (10, 11, "## B\ntext b")  # reference: 4-11
    title = expand_chunk(_row(chunks["Title"], path))
    assert (title.start_line, title.end_line) == (1, 11)
    a1 = expand_chunk(_row(chunks["A1"], path))
    assert (a1.start_line, a1.end_line, a1.content) == (7, 9, "### A1\nsub\n")
    for e in (a, b, title, a1):
        assert e.content == _lines(e, path)


def test_no_section_returns_exactly_the_chunk(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    a = expand_chunk(_row(chunks["A"], path), section=False)
    # The reference ignored --no-section and returned the whole (wrong) section.
    assert (a.start_line, a.end_line, a.content) == (4, 6, "## A\ntext a\n")  # the chunk's range
    assert a.content.strip() == chunks["A"].content


def test_context_lines(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    a1 = expand_chunk(_row(chunks["A1"], path), context_lines=1)
    assert (a1.start_line, a1.end_line, a1.content) == (6, 10, "\n### A1\nsub\n\n## B")  # untrimmed
    zero = expand_chunk(_row(chunks["A1"], path), context_lines=0, section=True)
    assert (zero.start_line, zero.end_line) == (7, 9)  # context wins over section
    clamped = expand_chunk(_row(chunks["Title"], path), context_lines=50, section=False)
    assert (clamped.start_line, clamped.end_line) == (1, 11)
    assert clamped.content == EXAMPLE.rstrip("\n")


def test_negative_context_is_refused(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    with pytest.raises(InvalidExpandOptionError) as info:
        expand_chunk(_row(chunks["A"], path), context_lines=-1)
    assert isinstance(info.value, ValueError) and info.value.hint


def test_headings_in_code_fences_do_not_end_a_section(tmp_path: Path) -> None:
    text = "## Setup\nRun:\n```bash\n# install\npip install x\n```\nDone.\n## Next\nmore text\n"
    path, chunks = _file(tmp_path, text)
    setup = expand_chunk(_row(chunks["Setup"], path))
    # The reference's bare "#" scan stopped at "# install" (level 1 <= 2).
    assert (setup.start_line, setup.end_line) == (1, 7)
    assert setup.content.endswith("```\nDone.")


def test_preamble_expands_to_text_before_first_heading(tmp_path: Path) -> None:
    text = "intro line\nmore intro\n\n# First\nbody one\n# Second\nbody two\n"
    path, chunks = _file(tmp_path, text)
    pre = expand_chunk(_row(chunks[""], path))
    # The reference returned everything from the chunk to the end of the file.
    assert (pre.start_line, pre.end_line, pre.content) == (1, 3, "intro line\nmore intro\n")


def test_blank_lines_of_a_journal_preamble_stay_in_its_range(tmp_path: Path) -> None:
    path = tmp_path / "j.md"
    path.write_text("\n\nloose note\n\n## Session 10:00\n\n### 10:00\n- x y\n", encoding="utf-8")
    row = {
        "chunk_hash": "1",
        "source": str(path),
        "heading": "",
        "heading_level": 0,
        "start_line": 1,
        "end_line": 4,
    }
    pre = expand_chunk(row)
    assert (pre.start_line, pre.end_line, pre.content) == (1, 4, "\n\nloose note\n")


def test_chunk_at_end_of_file(tmp_path: Path) -> None:
    text = "# A\nfirst\n\n# Last\nline one\nline two\n"
    path, chunks = _file(tmp_path, text)
    last = chunks["Last"]
    assert last.end_line == 6 == len(split_lines(text))
    for kwargs in ({}, {"section": False}, {"context_lines": 3}):
        e = expand_chunk(_row(last, path), **kwargs)
        assert e.end_line == 6
        assert e.content == _lines(e, path)
        assert e.content.endswith("line one\nline two")


def test_crlf_source_lines_match_the_chunker(tmp_path: Path) -> None:
    text = EXAMPLE.replace("\n", "\r\n")
    path, chunks = _file(tmp_path, text)
    a = expand_chunk(_row(chunks["A"], path))
    assert (a.start_line, a.end_line, a.content) == (4, 9, "## A\ntext a\n\n### A1\nsub\n")


def test_split_chunk_expands_to_its_whole_section(tmp_path: Path) -> None:
    anchor = ANCHORS["claude-code"][0]
    body = "\n".join(f"- bullet {i} " + "word " * 30 for i in range(12))
    text = (
        f"## Session 09:00\n\n### 09:00\n{anchor}\n{body}\n\n"
        "### 09:30\n<!-- session:s2 turn:t2 transcript:/t2 -->\n- other turn\n"
    )
    path, _ = _file(tmp_path, text)
    parts = [c for c in chunk_markdown(text, str(path), max_chunk_size=400) if c.heading == "09:00"]
    assert len(parts) > 2
    later = parts[-1]
    whole = expand_chunk(_row(later, path))
    assert whole.start_line == 3 and whole.content.startswith("### 09:00\n" + anchor)
    assert whole.end_line == 3 + 1 + 12 + 1  # heading, anchor, twelve bullets, the blank line
    own = expand_chunk(_row(later, path), section=False)
    assert own.content.strip() == later.content  # exact lines; the chunk was stripped
    # Its lines hold no anchor, but the turn it belongs to does.
    assert own.anchor is not None and own.anchor.session == "sess-1"
    assert expand_chunk(_row(later, path), context_lines=40).anchor == own.anchor


def test_context_does_not_borrow_a_neighbouring_turns_anchor(tmp_path: Path) -> None:
    text = (
        "### 09:00\n<!-- session:s1 turn:t1 transcript:/t1 -->\n- first\n\n"
        "### 09:05\n<!-- session:s2 turn:t2 transcript:/t2 -->\n- second\n"
    )
    path, chunks = _file(tmp_path, text)
    e = expand_chunk(_row(chunks["09:05"], path), context_lines=5)
    assert e.content.startswith("### 09:00")
    assert e.anchor is not None and e.anchor.session == "s2"


@pytest.mark.parametrize("name", sorted(ANCHORS))
def test_expand_finds_every_platforms_anchor(tmp_path: Path, name: str) -> None:
    comment, fields = ANCHORS[name]
    text = f"# 2026-03-25\n\n## Session 15:24\n\n### 15:24\n{comment}\n- User asked X.\n- Agent did Y.\n"
    path, chunks = _file(tmp_path, text)
    for kwargs in ({}, {"section": False}, {"context_lines": 2}):
        e = expand_chunk(_row(chunks["15:24"], path), **kwargs)
        assert e.anchor is not None and e.anchor.to_dict() == fields
        assert e.to_dict()["anchor"] == fields


def test_to_dict_keys_and_order(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    e = expand_chunk(_row(chunks["B"], path, chunk_hash="57f026237c0da79b"))
    assert e.to_dict() == {
        "chunk_hash": "57f026237c0da79b",
        "source": str(path),
        "heading": "B",
        "start_line": 10,
        "end_line": 11,
        "content": "## B\ntext b",
    }
    assert list(e.to_dict()) == ["chunk_hash", "source", "heading", "start_line", "end_line", "content"]
    assert e.anchor is None and e.warning is None


# --- failures ----------------------------------------------------------------------------------------


def test_missing_source(tmp_path: Path) -> None:
    row = {"chunk_hash": "ab", "source": str(tmp_path / "gone.md"), "start_line": 1, "end_line": 2}
    with pytest.raises(SourceFileNotFoundError) as info:
        expand_chunk(row)
    assert str(info.value) == f"Source file not found: {tmp_path / 'gone.md'}"
    assert info.value.hint == (
        f"the file was moved or deleted: `memsearch index {tmp_path / 'gone.md'}` removes its chunks "
        "from the index (then index where it went)"
    )
    assert isinstance(info.value, FileNotFoundError)
    # a folder moved away: the hint names the folder, so one command drops all it held
    row["source"] = str(tmp_path / "notes" / "deep" / "gone.md")
    with pytest.raises(SourceFileNotFoundError) as info:
        expand_chunk(row)
    assert f"`memsearch index {tmp_path / 'notes'}` removes its chunks" in info.value.hint


def test_file_shrank_since_indexing(tmp_path: Path) -> None:
    path, chunks = _file(tmp_path, EXAMPLE)
    path.write_text("# Title\n", encoding="utf-8")
    with pytest.raises(StaleChunkError) as info:
        expand_chunk(_row(chunks["B"], path))
    assert f"`memsearch index {path}` brings its chunks up to date" in info.value.hint


def test_binary_source_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_bytes(b"\x00\x01\x02")
    with pytest.raises(MemSearchError, match="looks like a binary file"):
        expand_chunk({"chunk_hash": "ab", "source": str(path), "start_line": 1, "end_line": 1})


def test_invalid_utf8_source_is_replaced_with_warning(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b"# T\nsome \xff text\n")
    e = expand_chunk(
        {
            "chunk_hash": "ab",
            "source": str(path),
            "heading": "T",
            "heading_level": 1,
            "start_line": 1,
            "end_line": 2,
        }
    )
    assert e.content == "# T\nsome \ufffd text"
    assert e.warning is not None and "at byte 9" in e.warning


# --- the benchmark corpus ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run(
        [sys.executable, str(GEN_CORPUS), str(out), "--files", "8", "--chunks", "200"],
        check=True,
        capture_output=True,
    )
    return sorted((out / "memory").glob("*.md"))


def test_every_corpus_turn_expands_to_itself_with_its_anchor(corpus: list[Path]) -> None:
    count = 0
    for path in corpus:
        text = path.read_text(encoding="utf-8")
        for chunk in chunk_markdown(text, str(path)):
            for section in (True, False):
                e = expand_chunk(_row(chunk, path), section=section)
                assert e.content.strip() == chunk.content
                assert e.content == _lines(e, path)
                assert e.anchor is not None and e.anchor.kind == "claude-code"
                assert f"turn:{e.anchor.turn} " in chunk.content
            count += 1
    assert count == 200
