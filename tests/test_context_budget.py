"""The context budget (memsearch.agent.context_budget): real token counts, what is left out first, the line
that says so, and cuts that never split a character or a secret's placeholder. The hooks' use of it
runs through real ``memsearch hook`` processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.agent import context_budget as cb
from memsearch.embeddings.onnx import DEFAULT_MODEL, PACKAGED_MODELS


def test_the_counter_uses_the_default_models_packaged_tokenizer() -> None:
    assert PACKAGED_MODELS[DEFAULT_MODEL].tokenizer == cb.TOKENIZER_FILE


def test_token_counts_are_the_real_tokenizers() -> None:
    assert cb.count_tokens("") == 0
    assert cb.count_tokens("hello world") == 2
    assert cb.count_tokens("unbelievably") > 1  # WordPiece splits a rare word
    # one token per CJK character, with or without spaces
    assert cb.count_tokens("订单导出失败") == 6
    assert cb.count_tokens("订单 导出 失败") == 6
    # joining parts with blank lines adds no token: budgets of parts add up
    assert cb.count_tokens("a b\n\nc d") == cb.count_tokens("a b") + cb.count_tokens("c d")


def test_remembered_counts_are_the_same_and_keep_no_text() -> None:
    import os
    import stat

    text = "[memsearch] Notes from past sessions are searchable 订单导出失败"
    assert cb.count_remembered(text) == cb.count_tokens(text) == cb.count_remembered(text)
    path = Path(os.environ["HOME"]) / ".memsearch" / cb.COUNTS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "Notes" not in path.read_text(encoding="utf-8")
    for n in range(cb.COUNTS_KEPT + 10):
        cb.count_remembered(f"text number {n}")
    assert len(json.loads(path.read_text(encoding="utf-8"))) == cb.COUNTS_KEPT  # bounded


def test_clip_keeps_whole_characters_of_chinese_text() -> None:
    text = "会议记录：" + "订单导出失败，因为超时。" * 40
    kept, left = cb.clip(text, 50)
    assert text.startswith(kept) and kept
    assert cb.count_tokens(kept) <= 50
    assert left == cb.count_tokens(text) - cb.count_tokens(kept)
    kept.encode("utf-8").decode("utf-8")  # a whole string of whole characters
    assert cb.clip(text, 10_000) == (text, 0)


def test_clip_never_cuts_inside_a_secret_placeholder() -> None:
    text = "the deploy key is [REDACTED:github-token] and then more words follow here"
    before = cb.count_tokens("the deploy key is")
    for budget in range(before + 1, before + 8):  # every cut that would land inside the placeholder
        kept, _left = cb.clip(text, budget)
        assert "[REDACTED" not in kept or "[REDACTED:github-token]" in kept, (budget, kept)


def test_clip_prefers_a_line_end() -> None:
    text = "\n".join(f"- line number {i} with a few words" for i in range(30))
    kept, left = cb.clip(text, 60)
    assert left > 0 and text.startswith(kept)
    assert kept.endswith("words")  # a whole line, not half of one


def test_fit_items_takes_the_priority_order_and_stops_at_the_first_that_does_not_fit() -> None:
    items = ["one two three", "four", "five six seven eight nine ten", "eleven"]
    fitted = cb.fit_items(items, 5, render=str)
    assert fitted.kept == ["one two three", "four"] and fitted.dropped == 2 and fitted.tokens == 4
    fitted = cb.fit_items(items, 2, render=str, priority=[3, 1, 0, 2])
    assert fitted.kept == ["four", "eleven"]  # original order, the wanted ones


DAYS = [
    ("2026-12-02.md", ["## Session 09:00", "### 09:00", "- today first", "### 09:30", "- today second 你好"]),
    (
        "2026-12-01.md",
        ["## Session 10:00", "### 10:00", "- yesterday first", "### 11:00", "- yesterday last"],
    ),
]


def test_fit_journal_leaves_out_older_days_then_older_entries() -> None:
    whole, dropped = cb.fit_journal(DAYS, 10_000)
    assert (
        dropped == 0 and "yesterday first" in whole and whole.index("2026-12-02") < whole.index("2026-12-01")
    )

    def cost(*entries: str) -> int:
        return sum(cb.count_tokens(e) for e in entries)

    today = cost("## Session 09:00\n### 09:00\n- today first", "### 09:30\n- today second 你好")
    text, dropped = cb.fit_journal(DAYS, today + cost("### 11:00\n- yesterday last"))
    assert dropped == 1  # yesterday's first entry, the oldest
    assert "yesterday last" in text and "yesterday first" not in text and "today first" in text
    text, dropped = cb.fit_journal(DAYS, today)
    assert dropped == 2 and "2026-12-01" not in text and "today first" in text
    text, dropped = cb.fit_journal(DAYS, cost("### 09:30\n- today second 你好"))
    assert dropped == 3 and "today second" in text and "today first" not in text
    assert cb.fit_journal(DAYS, 0) == ("", 4)


def test_left_out_line_is_one_line_naming_the_command() -> None:
    line = cb.left_out_line(3, "older journal entries", 'memsearch search "x"')
    assert line == (
        '[memsearch] 3 older journal entries left out (context budget); `memsearch search "x"` gets them.'
    )


# --- through the hooks ------------------------------------------------------------------------


def _journal(memory: Path) -> None:
    memory.mkdir(parents=True)
    for day in range(1, 6):
        entries = "".join(
            f"### {hour:02d}:00\n- day {day} hour {hour}: the zebra-ledger work continued 第{day}天\n\n"
            for hour in range(9, 15)
        )
        (memory / f"2026-11-0{day}.md").write_text(
            f"# 2026-11-0{day}\n\n## Session 09:00\n\n{entries}", encoding="utf-8"
        )


def _session_start(project: Path, home: Path, budget: int | None) -> str:
    config = f"[context]\nsession_start_tokens = {budget}\n" if budget else ""
    (home / ".memsearch").mkdir(exist_ok=True)
    (home / ".memsearch" / "config.toml").write_text(config, encoding="utf-8")
    stdin = json.dumps({"session_id": "s-budget", "cwd": str(project), "hook_event_name": "SessionStart"})
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "MEMSEARCH_NO_WATCH": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "hook", "claude-code", "session-start"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=project,
        env={**env, **{k: v for k, v in __import__("os").environ.items() if k == "PYTHONPATH"}},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"])


@pytest.mark.parametrize("share", [0.6, 0.9])
def test_session_start_context_stays_within_its_budget(tmp_path: Path, share: float) -> None:
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    _journal(project / ".memsearch" / "memory")
    whole = _session_start(project, tmp_path / "home", 100_000)
    assert "left out" not in whole and "day 4 hour 9:" in whole  # two newest days, all entries
    budget = int(cb.count_tokens(whole) * share)
    context = _session_start(project, tmp_path / "home", budget)
    assert cb.count_tokens(context) <= budget
    last = context.splitlines()[-1]
    assert last.startswith("[memsearch] ") and "older journal entries left out (context budget)" in last
    assert "memsearch search" in last and "--collection ms_" in last
    assert "day 5 hour 14:" in context  # the newest entry stays
    assert "day 4 hour 9:" not in context  # the oldest shown entry goes first
    assert "<memsearch-data" in context and "</memsearch-data>" in context  # the frame is whole


# --- search, expand and the prompt hint through the real CLI -----------------------------------


def _cli(
    *args: str, cwd: Path, stdin: str | None = None, agent: bool = True
) -> subprocess.CompletedProcess[str]:
    """``memsearch ARGS``; ``agent``: as a Claude Code Bash command runs it (``CLAUDECODE=1``)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMSEARCH_", "CODEX_"))}
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        capture_output=True,
        text=True,
        env={**env, "MEMSEARCH_NO_WATCH": "1", **({"CLAUDECODE": "1"} if agent else {})},
        cwd=cwd,
        input=stdin,
        timeout=120,
    )


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, str]:
    """A project whose journal has ten long entries about the zebra-ledger, indexed."""
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    memory = project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    sections = "".join(
        f"## Session {h:02d}:00\n\n### {h:02d}:00\n"
        + "".join(
            f"- Zebra-ledger rollout note {h}.{i}: batch {i} migrated and verified 第{i}批.\n"
            for i in range(12)
        )
        + "\n"
        for h in range(8, 18)
    )
    (memory / "2026-11-20.md").write_text(f"# 2026-11-20\n\n{sections}", encoding="utf-8")
    collection = _cli("hook", "claude-code", "collection", cwd=project).stdout.strip()
    done = _cli("index", str(memory), "--collection", collection, cwd=project)
    assert done.returncode == 0, done.stderr
    return project, collection


def _set(project: Path, key: str, value: str) -> None:
    assert _cli("config", "set", key, value, cwd=project).returncode == 0


def test_search_and_expand_output_keep_to_the_recall_budget(indexed: tuple[Path, str]) -> None:
    project, collection = indexed
    args = ("zebra-ledger rollout batch", "--top-k", "8", "--json-output", "--collection", collection)
    _set(project, "context.recall_tokens", "100000")
    full = json.loads(_cli("search", *args, cwd=project).stdout)
    assert len(full) == 8
    _set(project, "context.recall_tokens", "700")
    cut = _cli("search", *args, cwd=project)
    shown = json.loads(cut.stdout)  # still valid JSON: the left-out line is on stderr
    assert 1 <= len(shown) < 8
    assert [h["chunk_hash"] for h in shown] == [h["chunk_hash"] for h in full[: len(shown)]]  # the best
    assert sum(cb.count_tokens(json.dumps(h, indent=2, ensure_ascii=False)) for h in shown) <= 700
    line = cut.stderr.strip().splitlines()[-1]
    assert line.startswith(f"[memsearch] {8 - len(shown)} lower-ranked hits left out (context budget)")

    _set(project, "context.recall_tokens", "200")
    one = _cli("search", *args, cwd=project)
    (best,) = json.loads(one.stdout)  # the best hit alone is over budget: it shows, cut
    assert best["chunk_hash"] == full[0]["chunk_hash"] and full[0]["content"].startswith(best["content"])
    assert len(best["content"]) < len(full[0]["content"])
    assert cb.count_tokens(json.dumps(best, indent=2, ensure_ascii=False)) <= 200
    assert "[memsearch] 7 lower-ranked hits left out (context budget)" in one.stderr

    expanded = _cli(
        "expand",
        full[0]["chunk_hash"],
        "--lines",
        "200",
        "--json-output",
        "--collection",
        collection,
        cwd=project,
    )
    assert expanded.returncode == 0, expanded.stderr
    section = json.loads(expanded.stdout)
    assert cb.count_tokens(section["content"]) <= 200
    assert section["end_line"] - section["start_line"] == section["content"].count("\n")
    assert "tokens of the section left out (context budget)" in expanded.stderr


def test_a_person_gets_every_hit_asked_for(indexed: tuple[Path, str]) -> None:
    """Outside an agent's shell (no session, no host variable) the output is not cut: a person's
    ``search -k 8 --json-output | jq``, or a script written for the original, gets all 8 hits."""
    project, collection = indexed
    _set(project, "context.recall_tokens", "200")
    args = ("zebra-ledger rollout batch", "--top-k", "8", "--json-output", "--collection", collection)
    person = _cli("search", *args, cwd=project, agent=False)
    assert len(json.loads(person.stdout)) == 8 and "left out" not in person.stderr
    agent = _cli("search", *args, cwd=project)
    assert len(json.loads(agent.stdout)) == 1 and "left out" in agent.stderr


def test_prompt_hint_leaves_out_the_lowest_ranked_hits(indexed: tuple[Path, str]) -> None:
    project, collection = indexed
    _set(project, "plugins.claude-code.prompt_recall.auto_inject", "true")
    _set(project, "plugins.claude-code.prompt_recall.top_k", "6")
    prompt = "which zebra-ledger rollout batch was verified?"
    ranked = json.loads(
        _cli(
            "search", prompt, "--top-k", "6", "--json-output", "--collection", collection, cwd=project
        ).stdout
    )
    _set(project, "context.prompt_hint_tokens", "450")
    stdin = json.dumps({"session_id": "s", "cwd": str(project), "prompt": prompt})
    hooked = _cli("hook", "claude-code", "prompt-submit", cwd=project, stdin=stdin)
    assert hooked.returncode == 0, hooked.stderr
    context = json.loads(hooked.stdout)["hookSpecificOutput"]["additionalContext"]
    assert cb.count_tokens(context) <= 450
    shown = re.findall(r"\(chunk_hash ([0-9a-f]+)\)", context)
    assert 1 <= len(shown) < 6
    assert shown == [h["chunk_hash"] for h in ranked[: len(shown)]]
    assert context.splitlines()[-1].startswith(f"[memsearch] {6 - len(shown)} lower-ranked hits left out")
