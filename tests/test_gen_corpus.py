"""evaluation/gen_corpus.py, the benchmark corpus generator: deterministic, exactly one chunk per
turn, anchors that lead to a transcript memsearch can render, and the edit the benchmark relies on."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root holds evaluation/

from evaluation import gen_corpus

from memsearch.chunker import chunk_markdown
from memsearch.engine.expand import parse_anchor
from memsearch.transcript import Turn, find_turn, format_turns, parse_transcript

SCRIPT = Path(__file__).resolve().parents[1] / "evaluation" / "gen_corpus.py"
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _chunks(root: Path) -> list[tuple[Path, str]]:
    return [
        (path, chunk.content)
        for path in sorted((root / "memory").glob("*.md"))
        for chunk in chunk_markdown(path.read_text(encoding="utf-8"), str(path))
    ]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "corpus"
    stats = gen_corpus.generate(out, files=12, chunks=300, seed=3, zh=0.2)
    assert (stats["files"], stats["chunks"]) == (12, 300)
    return out


def test_same_arguments_give_byte_identical_output(tmp_path: Path) -> None:
    out = tmp_path / "c"
    command = [sys.executable, str(SCRIPT), str(out), "--files", "5", "--chunks", "80", "--seed", "11"]
    subprocess.run(command, check=True, capture_output=True)
    first = _digest(out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    subprocess.run(command, check=True, capture_output=True)
    assert _digest(out) == first
    assert len(first) > 5  # journals and transcripts
    # another seed gives another corpus
    other = tmp_path / "d"
    gen_corpus.generate(other, files=5, chunks=80, seed=12)
    assert _digest(other / "memory") != {
        k.removeprefix("memory/"): v for k, v in first.items() if k.startswith("memory/")
    }


def test_every_turn_is_exactly_one_chunk(corpus: Path) -> None:
    chunks = _chunks(corpus)
    assert len(chunks) == 300
    for path in sorted((corpus / "memory").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        turns = re.findall(r"^### \d\d:\d\d$", text, flags=re.MULTILINE)
        heads = [c.content.split("\n", 1)[0] for c in chunk_markdown(text, str(path))]
        assert heads == turns
        assert text.startswith(f"# {path.stem}\n\n## Session ")
    sizes = [len(content) for _, content in chunks]
    assert max(sizes) <= 1500
    assert 800 <= sum(sizes) / len(sizes) <= 1200


def test_every_anchor_leads_to_its_turn_in_a_rendered_transcript(corpus: Path) -> None:
    parsed: dict[str, list[Turn]] = {}
    for _, content in _chunks(corpus):
        anchor = parse_anchor(content)
        assert anchor is not None and anchor.kind == "claude-code"
        assert anchor.turn and anchor.transcript
        transcript = Path(anchor.transcript)
        assert transcript.parent == corpus.resolve() / "sessions"
        assert transcript.name == f"{anchor.session}.jsonl"
        turns = parsed.setdefault(str(transcript), parse_transcript(transcript))
        turn = turns[find_turn(turns, anchor.turn)]
        assert turn.role == "user" and turn.uuid == anchor.turn and turn.text
        assert f"### User ({anchor.turn}) [selected]" in format_turns(turns, selected=anchor.turn)
    assert len(parsed) == len(list((corpus / "sessions").glob("*.jsonl")))


def test_the_cli_renders_a_turn(corpus: Path) -> None:
    _, content = _chunks(corpus)[7]
    anchor = parse_anchor(content)
    assert anchor is not None and anchor.turn and anchor.transcript
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "transcript", anchor.transcript, "--turn", anchor.turn],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"### User ({anchor.turn}) [selected]" in proc.stdout
    assert "[Bash]" in proc.stdout


def test_chinese_share_follows_the_argument(corpus: Path, tmp_path: Path) -> None:
    def share(root: Path) -> float:
        chunks = _chunks(root)
        return sum(bool(_CJK.search(content)) for _, content in chunks) / len(chunks)

    assert 0.14 <= share(corpus) <= 0.26  # asked for 0.2
    none = tmp_path / "en"
    gen_corpus.generate(none, files=4, chunks=100, zh=0.0)
    assert share(none) == 0.0


def test_every_query_is_answered_by_a_planted_turn(tmp_path: Path) -> None:
    out = tmp_path / "c"
    gen_corpus.generate(out, files=6, chunks=len(gen_corpus.QUERIES) * 3)
    queries = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--queries"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert queries == gen_corpus.QUERIES
    assert any(_CJK.search(q) for q in queries) and not all(_CJK.search(q) for q in queries)
    contents = [content for _, content in _chunks(out)]
    # one distinctive phrase of each planted turn, in query order
    phrases = [
        "Stripe webhooks were being processed twice",
        "VAT on invoices with many line items was off by one cent",
        "BIGINT minor units",
        "数据库连接池耗尽",
        "UnicodeDecodeError",
        "LockNotAvailable",
        "Decision: WeasyPrint",
        "OOMKilled",
        "React Query",
        "N+1 query",
        "monthly invoices were generated twice",
        "pull requests under 400 changed lines",
        "部分退款的测试在 CI 上偶尔失败",
        "TLS certificate of api.tidemark.io expired",
    ]
    assert len(phrases) == len(queries)
    for phrase in phrases:
        assert any(phrase in c for c in contents), phrase


def test_edit_one_changes_one_bullet_and_appends_one_turn_in_one_file(tmp_path: Path) -> None:
    out = tmp_path / "c"
    gen_corpus.generate(out, files=5, chunks=60)
    before = {p.name: p.read_text(encoding="utf-8") for p in (out / "memory").glob("*.md")}
    for edit in (1, 2):
        previous = {p.name: p.read_text(encoding="utf-8") for p in (out / "memory").glob("*.md")}
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), str(out), "--edit-one"], capture_output=True, text=True, check=True
        )
        now = {p.name: p.read_text(encoding="utf-8") for p in (out / "memory").glob("*.md")}
        changed = [name for name in now if now[name] != previous[name]]
        assert len(changed) == 1 and set(now) == set(previous)
        assert proc.stdout.strip().endswith(changed[0])
        old_lines, new_lines = previous[changed[0]].splitlines(), now[changed[0]].splitlines()
        differing = [a for a, b in zip(old_lines, new_lines, strict=False) if a != b]
        assert len(differing) == 1 and differing[0].startswith("- ")  # one bullet changed ...
        old_chunks = chunk_markdown(previous[changed[0]], "f.md")
        new_chunks = chunk_markdown(now[changed[0]], "f.md")
        assert len(new_chunks) == len(old_chunks) + 1  # ... and one turn appended
        anchor = parse_anchor(new_chunks[-1].content)
        assert anchor is not None and anchor.turn and anchor.transcript
        turns = parse_transcript(anchor.transcript)
        assert turns[find_turn(turns, anchor.turn)].uuid == anchor.turn
        assert f"status check {edit}" in new_chunks[-1].content
    assert sum(before[n] != now[n] for n in before) == 1
