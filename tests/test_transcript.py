"""``memsearch transcript`` and ``memsearch.transcript``: every format, ids, selection, bad input.

Renderings of the realistic fixtures in tests/fixtures/transcripts/ are pinned by golden files in
its ``golden/`` folder; run with ``UPDATE_GOLDEN=1`` to rewrite them after an intended change (and
review the diff). The fixtures themselves come from ``make_fixtures.py`` (checked below).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memsearch.cli import cli
from memsearch.errors import UnknownTranscriptFormatError
from memsearch.transcript import (
    FORMATS,
    MAX_RENDER_CHARS,
    ToolCall,
    Turn,
    TurnNotFoundError,
    detect_format,
    find_turn,
    format_turns,
    last_turn,
    parse_transcript,
    read_transcript,
    select_turns,
    turns_to_json,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
GOLDEN = FIXTURES / "golden"
UNKNOWN_MESSAGE = (
    "Error: Unrecognized transcript format. Read the file directly to locate the relevant turns. "
    "Hint: memsearch reads Claude Code session JSONL, Codex rollout JSONL, DeepSeek Harness session "
    "JSONL, OpenClaw agent SQLite, OpenClaw session JSONL and OpenCode SQLite; "
)


def _load_make_fixtures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mf = _load_make_fixtures()


@pytest.fixture(scope="session")
def opencode_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mf.build_opencode_db(tmp_path_factory.mktemp("opencode") / "opencode.db")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["transcript", *args], catch_exceptions=False)


def check_golden(name: str, actual: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


# --- fixtures and golden renderings ---------------------------------------------------------


def test_committed_fixtures_match_the_generator(tmp_path: Path) -> None:
    for generated in mf.write_fixtures(tmp_path):
        assert generated.read_bytes() == (FIXTURES / generated.name).read_bytes(), generated.name


# golden name → (fixture, extra arguments); "opencode" means the generated database.
GOLDEN_CASES: dict[str, tuple[str, list[str]]] = {
    "claude.txt": ("claude.jsonl", []),
    "claude.json": ("claude.jsonl", ["--json-output"]),
    "claude-turn.txt": ("claude.jsonl", ["--turn", mf.CLAUDE_PROMPT_2[:8], "--context", "1"]),
    "codex.txt": ("codex.jsonl", []),
    "codex.json": ("codex.jsonl", ["-j"]),
    "codex-turn.json": ("codex.jsonl", ["-t", mf.CODEX_TURN_2, "-c", "0", "-j"]),
    "codex-legacy.txt": ("codex-legacy.jsonl", []),
    "codex-legacy.json": ("codex-legacy.jsonl", ["-j"]),
    "openclaw.txt": ("openclaw.jsonl", []),
    "openclaw.json": ("openclaw.jsonl", ["-j"]),
    "opencode.txt": ("opencode", ["--session", mf.OPENCODE_NEW]),
    "opencode.json": ("opencode", ["--session", mf.OPENCODE_NEW, "-j"]),
    "opencode-turn.txt": ("opencode", ["--session", "ses_3a1e", "--turn", mf.OPENCODE_USER_2, "-c", "1"]),
    "broken.txt": ("broken.jsonl", []),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_rendering(name: str, opencode_db: Path) -> None:
    fixture, args = GOLDEN_CASES[name]
    path = opencode_db if fixture == "opencode" else FIXTURES / fixture
    result = run(str(path), *args)
    assert result.exit_code == 0, result.output
    if fixture != "broken.jsonl":
        assert result.stderr == ""
    check_golden(name, result.stdout)
    if name.endswith(".json"):
        turns = json.loads(result.stdout)
        assert turns and all(list(t) == ["role", "uuid", "text", "tools"] for t in turns)
        assert all(list(c) == ["name", "command", "output"] for t in turns for c in t["tools"])


def test_json_output_keeps_non_ascii_and_indent_2() -> None:
    out = run(str(FIXTURES / "claude.jsonl"), "-j").stdout
    assert "这是测试结果的截图" in out and "🎉" in out and "\\u" not in out
    assert out.startswith('[\n  {\n    "role": "user",\n')


# --- Claude Code ----------------------------------------------------------------------------


def test_claude_skips_meta_sidechain_and_injected_context() -> None:
    turns = parse_transcript(FIXTURES / "claude.jsonl")
    text = "\n".join(t.text for t in turns)
    assert "Caveat" not in text  # isMeta
    assert "rename handling" not in text  # sidechain (sub-agent) entries
    assert "system-reminder" not in text and "editor has src/watcher.py open" not in text
    assert turns[0] == Turn(
        "user", mf.CLAUDE_PROMPT_1, "The watcher test fails about one run in five. Can you find out why?"
    )


def test_claude_entries_of_one_response_form_one_turn_and_keep_their_ids() -> None:
    turns = parse_transcript(FIXTURES / "claude.jsonl")
    first_reply = turns[1]
    assert first_reply.text == "Let me run the test a few times first."
    assert [t.name for t in first_reply.tools] == ["Bash"]
    assert mf.CLAUDE_MERGED_TEXT in first_reply.aliases
    # an id copied from any merged entry finds the turn
    assert find_turn(turns, mf.CLAUDE_MERGED_TEXT) == 1
    parallel = turns[2]
    assert [(t.name, t.command) for t in parallel.tools] == [
        ("Read", "/home/dev/projects/notes-app/src/watcher.py"),
        ("Grep", "on_moved"),
    ]
    assert parallel.tools[1].output == "No matches found"


def test_tool_output_is_clipped_to_200_characters() -> None:
    turns = parse_transcript(FIXTURES / "claude.jsonl")
    output = turns[2].tools[0].output
    assert output.endswith(" …[truncated]")
    assert len(output) <= 200 + len(" …[truncated]")
    assert output.startswith("1\tfrom watchdog.events import FileSystemEventHandler")
    assert turns[5].tools[0].output.startswith("[error] src/watcher.py:14:9: F841")


# --- Codex ----------------------------------------------------------------------------------


def test_codex_turn_ids_come_from_the_rollout_and_are_stable() -> None:
    first = parse_transcript(FIXTURES / "codex.jsonl")
    assert [t.uuid for t in first] == [
        mf.CODEX_TURN_1,
        f"{mf.CODEX_TURN_1}.1",
        mf.CODEX_TURN_2,
        f"{mf.CODEX_TURN_2}.1",
    ]
    assert turns_to_json(first) == turns_to_json(parse_transcript(FIXTURES / "codex.jsonl"))
    legacy = parse_transcript(FIXTURES / "codex-legacy.jsonl")
    assert [t.uuid for t in legacy] == ["L3", "L4", "L9", "L10"]
    assert select_turns(legacy, "L9", 0) == [legacy[2]]


def test_codex_reads_tool_outputs_and_skips_reasoning_and_duplicates() -> None:
    turns = parse_transcript(FIXTURES / "codex.jsonl")
    reply = turns[1]
    assert reply.text == "Added `--dry-run`: the script now lists what it would delete and exits."
    assert reply.tools[0] == ToolCall(
        "shell",
        "bash -lc rg -n 'argparse|def main' scripts/cleanup.py",
        "3:import argparse\n41:def main(argv=None):\n42:    parser = argparse.ArgumentParser()",
    )
    assert reply.tools[1].name == "apply_patch"
    assert reply.tools[1].output == "Success. Updated the following files:\nM scripts/cleanup.py"
    all_text = json.dumps(turns_to_json(turns), ensure_ascii=False)
    assert "Locating the argument parser" not in all_text and "environment_context" not in all_text


#: A rollout written by Codex 0.171.0 (`codex exec` with one shell call; long context blocks trimmed).
CODEX_0171 = FIXTURES / "codex-0171.jsonl"
CODEX_0171_TURN = "01a231f6-8929-7101-907a-d32786fd9fff"


def test_codex_0171_rollout_is_read_from_its_completed_items() -> None:
    """Codex 0.171.0 writes no user_message/agent_message events: the messages are read from its
    item_completed events, the harness's context blocks stay out, the exec header is cut."""
    turns = parse_transcript(CODEX_0171)
    assert [(t.role, t.uuid) for t in turns] == [
        ("user", CODEX_0171_TURN),
        ("assistant", f"{CODEX_0171_TURN}.1"),
    ]
    assert turns[0].text == "please list files here"
    assert turns[1].text.startswith("The tool returned:")
    assert turns[1].tools == [ToolCall("exec_command", "echo hello-from-tool; ls", "hello-from-tool")]
    all_text = json.dumps(turns_to_json(turns))
    assert "environment_context" not in all_text and "skills_instructions" not in all_text


def test_codex_rollout_without_message_events_or_items_falls_back_to_response_messages(
    tmp_path: Path,
) -> None:
    entries = [json.loads(line) for line in CODEX_0171.read_text().splitlines()]
    kept = [e for e in entries if e["payload"].get("type") != "item_completed"]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    turns = parse_transcript(path)
    assert [(t.role, t.text[:22]) for t in turns] == [
        ("user", "please list files here"),
        ("assistant", "The tool returned: Chu"),
    ]


# --- OpenClaw and OpenCode ------------------------------------------------------------------


def test_openclaw_reads_both_tool_result_shapes() -> None:
    turns = parse_transcript(FIXTURES / "openclaw.jsonl")
    tools = [tool for t in turns for tool in t.tools]
    assert [(t.name, t.output) for t in tools] == [
        ("exec", "Thu Mar 26  09:30  Stand-up\n            14:00  Dentist"),
        ("read", "(image 1024x768, OCR: 今日特价 牛肉面 ¥28)"),
        ("write", "[error] EACCES: permission denied, open '~/notes/menu.md'"),
    ]


def test_opencode_session_choice(opencode_db: Path, tmp_path: Path) -> None:
    result = run(str(opencode_db))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {opencode_db} holds 2 OpenCode sessions; choose one with --session. "
        f"Hint: most recent first: {mf.OPENCODE_NEW}, {mf.OPENCODE_OLD}\n"
    )
    result = run(str(opencode_db), "--session", "ses_nope")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no OpenCode session 'ses_nope' in {opencode_db}. "
        f"Hint: sessions in this database, most recent first: {mf.OPENCODE_NEW}, {mf.OPENCODE_OLD}\n"
    )
    result = run(str(opencode_db), "--session", "ses_3a1")
    assert result.exit_code == 1
    assert "matches 2 sessions" in result.stderr
    old = read_transcript(opencode_db, session="ses_3a1f")
    assert old.session == mf.OPENCODE_OLD
    assert [t.text for t in old.turns] == ["hello from an older session", "Hi! What shall we work on?"]

    # a database with one session needs no --session
    single = tmp_path / "single.db"
    single.write_bytes(opencode_db.read_bytes())
    with sqlite3.connect(single) as con:
        con.execute("DELETE FROM message WHERE session_id = ?", (mf.OPENCODE_OLD,))
        con.execute("UPDATE message SET data = 'not json' WHERE id = ?", (mf.OPENCODE_USER_2,))
    con.close()
    transcript = read_transcript(single)
    assert transcript.session == mf.OPENCODE_NEW
    assert mf.OPENCODE_USER_2 not in [t.uuid for t in transcript.turns]
    assert transcript.warnings == [f"{single}: skipped 1 rows whose data is not a JSON object"]


def test_opencode_synthetic_text_is_hidden(opencode_db: Path) -> None:
    turns = parse_transcript(opencode_db, session=mf.OPENCODE_NEW)
    user2 = turns[find_turn(turns, mf.OPENCODE_USER_2)]
    assert user2.text == "再检查一下这个截图里的报错 🙏\n[image: shot.png]"


def test_sqlite_without_opencode_tables_is_unknown(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE notes (id INTEGER)")
    con.close()
    result = run(str(other))
    assert result.exit_code == 3
    assert result.stderr == UNKNOWN_MESSAGE + f"{other} is a SQLite database without OpenCode's tables\n"


# --- detection and bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "name"),
    [
        ("claude.jsonl", "claude"),
        ("codex.jsonl", "codex"),
        ("codex-legacy.jsonl", "codex"),
        ("openclaw.jsonl", "openclaw"),
    ],
)
def test_detect_format(fixture: str, name: str) -> None:
    assert detect_format(FIXTURES / fixture) == name
    assert read_transcript(FIXTURES / fixture).format == name


def test_detect_format_table_and_entries(opencode_db: Path) -> None:
    assert detect_format(opencode_db) == "opencode"
    assert list(FORMATS) == ["openclaw-db", "opencode", "codex", "openclaw", "claude", "dsh"]
    # the first entry any format accepts decides; unrelated entries before it are skipped
    assert detect_format([{"type": "summary"}, {"type": "user", "message": {"content": "x"}}]) == "claude"
    with pytest.raises(UnknownTranscriptFormatError) as info:
        detect_format([{"type": "summary"}])
    assert info.value.exit_code == 3


def test_unknown_format_exits_3() -> None:
    path = FIXTURES / "unknown.jsonl"
    result = run(str(path))
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr == UNKNOWN_MESSAGE + f"{path} is none of them\n"


def test_unknown_format_exits_3_in_a_real_process(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Not a transcript\n\nJust markdown.\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "memsearch", "transcript", str(notes)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr == UNKNOWN_MESSAGE + f"{notes} is none of them\n"


def test_missing_file_and_directory_exit_1(tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    result = run(str(missing))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: transcript not found: {missing}. Hint: check the path; Claude Code keeps sessions in "
        "~/.claude/projects/, Codex in ~/.codex/sessions/, OpenCode in ~/.local/share/opencode/opencode.db, "
        "DeepSeek Harness in ~/.dsh/sessions/\n"
    )
    result = run(str(tmp_path))
    assert result.exit_code == 1
    assert (
        result.stderr == f"Error: not a transcript file: {tmp_path}. Hint: pass the path of a session file\n"
    )


def test_session_option_is_for_opencode_only() -> None:
    path = FIXTURES / "codex.jsonl"
    result = run(str(path), "--session", "ses_x")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: --session applies only to OpenCode and OpenClaw databases; {path} is a Codex rollout JSONL "
        "transcript. Hint: leave out --session (a JSONL transcript holds one session)\n"
    )


def test_invalid_utf8_and_torn_last_line_still_render() -> None:
    path = FIXTURES / "broken.jsonl"
    result = run(str(path))
    assert result.exit_code == 0
    assert result.stderr == (
        f"Warning: {path}: invalid UTF-8 at byte offset 275 (line 2); the bad bytes were replaced\n"
        f"Warning: {path}: skipped 1 line that is not a JSON object (first: line 3)\n"
        f"Warning: {path}: the last line is incomplete (57 bytes, no newline; the session may still be "
        "writing it) and was skipped\n"
    )
    assert "caf\ufffd cr\ufffdme" in result.stdout
    assert "welcome" not in result.stdout


def test_crlf_and_bom_are_tolerated(tmp_path: Path) -> None:
    src = (FIXTURES / "claude.jsonl").read_bytes()
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + src.replace(b"\n", b"\r\n"))
    transcript = read_transcript(path)
    assert transcript.warnings == []
    assert turns_to_json(transcript.turns) == turns_to_json(parse_transcript(FIXTURES / "claude.jsonl"))


def test_empty_file_renders_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new-session.jsonl"
    path.write_bytes(b"\n")
    result = run(str(path))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", f"Warning: {path} is empty\n")
    assert run(str(path), "-j").stdout == "[]\n"


def test_transcript_without_turns_warns(tmp_path: Path) -> None:
    path = tmp_path / "quiet.jsonl"
    path.write_text(
        '{"type":"user","isMeta":true,"uuid":"u1","message":{"content":"caveat"}}\n', encoding="utf-8"
    )
    result = run(str(path))
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr == f"Warning: no conversation turns in {path}\n"


# --- selecting turns ------------------------------------------------------------------------


def test_unmatched_turn_is_an_error() -> None:
    result = run(str(FIXTURES / "codex.jsonl"), "--turn", "deadbeef")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "Error: no turn matches id 'deadbeef' (4 turns in the transcript). Hint: run the command "
        "without --turn to see each turn's id after its role, or add --json-output; a unique prefix of "
        "an id is enough\n"
    )


def _turns(n: int) -> list[Turn]:
    return [
        Turn("user" if i % 2 == 0 else "assistant", f"id-{i:02d}-{'x' * 8}", f"text {i}") for i in range(n)
    ]


def test_find_turn_rules() -> None:
    turns = [Turn("user", "abc12345-long"), Turn("assistant", "abc"), Turn("user", "zzzzzzzz-9")]
    assert find_turn(turns, "abc") == 1  # exact beats prefix
    assert find_turn(turns, "abc1") == 0  # prefix
    assert find_turn(turns, "zzzzzzzz-other") == 2  # the original's first-8-characters rule
    with pytest.raises(TurnNotFoundError):
        find_turn(turns, "nope")
    numbered = [Turn("user", "1"), Turn("assistant", "a-1"), Turn("user", "2")]  # DSH's turn numbers
    assert find_turn(numbered, "2") == 2
    with pytest.raises(TurnNotFoundError):
        find_turn(numbered, "13")  # not turn 1: the first-8-characters rule needs ids that long


def test_select_turns_context_is_clamped() -> None:
    turns = _turns(10)
    assert select_turns(turns, None, 3) == turns
    assert select_turns(turns, "", 3) == turns
    assert [t.text for t in select_turns(turns, "id-01", 2)] == ["text 0", "text 1", "text 2", "text 3"]
    assert [t.text for t in select_turns(turns, "id-09", 1)] == ["text 8", "text 9"]
    assert select_turns(turns, "id-05", 0) == [turns[5]]


def test_last_turn() -> None:
    turns = parse_transcript(FIXTURES / "claude.jsonl")
    user, replies = last_turn(turns)
    assert user is not None and user.uuid == mf.CLAUDE_PROMPT_2
    assert [r.text.splitlines()[0] for r in replies] == [
        "截图显示 8 个测试全部通过 ✅。我再跑一下 lint。",
        "Done. Summary:",
    ]
    assert last_turn([Turn("assistant", "a", "hi")]) == (None, [])
    assert last_turn([]) == (None, [])


# --- long renderings ------------------------------------------------------------------------


def _block(turn: Turn, selected: bool = False) -> str:
    role = "User" if turn.role == "user" else "Assistant"
    return f"### {role} ({turn.uuid}){' [selected]' if selected else ''}\n{turn.text}"


def test_long_rendering_keeps_the_newest_turns(tmp_path: Path) -> None:
    entries: list[dict[str, Any]] = []
    for i in range(40):
        kind = "user" if i % 2 == 0 else "assistant"
        content: Any = f"turn {i:02d} " + "word " * 200
        if kind == "assistant":
            content = [{"type": "text", "text": content}]
        entries.append({"type": kind, "uuid": f"u{i:02d}", "message": {"role": kind, "content": content}})
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    turns = parse_transcript(path)
    blocks = [_block(t) for t in turns]
    fit = MAX_RENDER_CHARS // (len(blocks[0]) + 2)
    expected = (
        "\n\n".join([f"…[{40 - fit} earlier turns not shown; use --turn ID to see them]", *blocks[-fit:]])
        + "\n"
    )
    result = run(str(path))
    assert result.stdout == expected
    assert blocks[-1] in result.stdout and blocks[0] not in result.stdout

    # with --turn, the selected turn stays in the middle of what is shown
    result = run(str(path), "--turn", "u05", "--context", "30")
    shown = select_turns(turns, "u05", 30)
    assert result.stdout.startswith(_block(shown[0]))
    assert _block(turns[5], selected=True) in result.stdout
    assert result.stdout.endswith("later turns not shown]\n")


def test_selected_turn_is_shown_whole_even_when_too_long() -> None:
    turns = [
        Turn("user", "a", "short question"),
        Turn("assistant", "b", "y" * 500),
        Turn("user", "c", "next"),
    ]
    out = format_turns(turns, selected="b", max_chars=100)
    assert out == (
        "…[1 earlier turn not shown; use --turn ID to see them]\n\n"
        f"### Assistant (b) [selected]\n{'y' * 500}\n\n"
        "…[1 later turn not shown]\n"
    )
    # without a selection the newest turn is kept, clipped to the budget
    out = format_turns(turns[:2], max_chars=100)
    assert out == (
        "…[1 earlier turn not shown; use --turn ID to see them]\n\n"
        f"### Assistant (b)\n{'y' * 82}\n…[turn truncated]\n"
    )
    assert format_turns([]) == ""


def test_format_turns_indents_multiline_tools() -> None:
    turn = Turn("assistant", "", "ok", [ToolCall("Bash", "cat <<EOF\nhi\nEOF", "hi\nthere")])
    assert (
        format_turns([turn])
        == "### Assistant\nok\n- $ [Bash] cat <<EOF\n    hi\n    EOF\n  → hi\n    there\n"
    )


def test_claude_local_slash_commands_are_not_turns(tmp_path: Path) -> None:
    """As Claude Code 2.1.197 records them: ``/exit`` (caveat, command, its stdout) is dropped; a
    slash command the model answered stays, as the line the user typed."""

    def user(uuid: str, content: str, **extra: Any) -> dict[str, Any]:
        return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}, **extra}

    def reply(uuid: str, text: str) -> dict[str, Any]:
        content = [{"type": "text", "text": text}]
        return {
            "type": "assistant",
            "uuid": uuid,
            "message": {"id": f"m-{uuid}", "role": "assistant", "content": content},
        }

    command = (
        "<command-name>/{name}</command-name>\n            <command-message>{name}</command-message>\n"
        "            <command-args>{args}</command-args>"
    )
    entries = [
        user("u1", "Why is the build slow?"),
        reply("a1", "The cache is cold."),
        user("u2", command.format(name="review", args="src/build.py")),
        user("u3", "Review src/build.py for slow steps.", isMeta=True),
        reply("a2", "Two steps can run in parallel."),
        user(
            "c1",
            "<local-command-caveat>Caveat: The messages below were generated by the user while "
            "running local commands.</local-command-caveat>",
            isMeta=True,
        ),
        user("c2", command.format(name="model", args="")),
        user("c3", "<local-command-stdout>Set model to haiku</local-command-stdout>"),
        user("c4", command.format(name="exit", args="")),
        user("c5", "<local-command-stdout>See ya!</local-command-stdout>"),
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    turns = parse_transcript(path)
    assert [(t.role, t.uuid, t.text) for t in turns] == [
        ("user", "u1", "Why is the build slow?"),
        ("assistant", "a1", "The cache is cold."),
        ("user", "u2", "/review src/build.py"),
        ("assistant", "a2", "Two steps can run in parallel."),
    ]
    assert last_turn(turns)[0] == turns[2]


# --- OpenClaw's agent database (OpenClaw 2026.9) ----------------------------------------------


def _openclaw_db(path: Path, rows: list[tuple[str, int, dict, bool]]) -> Path:
    """An ``openclaw-agent.sqlite`` with ``transcript_events`` rows (session, seq, entry, compressed)."""
    from backports import zstd  # what memsearch reads compressed rows with on Python < 3.14

    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB, event_utf8_bytes INTEGER, "
            "navigation_json TEXT, PRIMARY KEY (session_id, seq))"
        )
        for session, seq, entry, packed in rows:
            raw = json.dumps(entry)
            text, blob = (None, zstd.compress(raw.encode())) if packed else (raw, None)
            con.execute(
                "INSERT INTO transcript_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session, seq, text, 1_700_000_000_000 + seq, blob, len(raw), "{}" if packed else None),
            )
    con.close()
    return path


def _oc(entry_id: str, role: str, content: object) -> dict:
    return {"type": "message", "id": entry_id, "message": {"role": role, "content": content}}


def test_openclaw_agent_database(tmp_path: Path) -> None:
    long_answer = "Backoff doubles each time. " * 60  # >1 KiB: OpenClaw stores such entries zstd-compressed
    db = _openclaw_db(
        tmp_path / "openclaw-agent.sqlite",
        [
            ("s-old", 0, {"type": "session", "version": 4, "id": "s-old"}, False),
            ("s-old", 1, _oc("o-1", "user", "an older session"), False),
            ("s-new", 0, {"type": "session", "version": 4, "id": "s-new"}, False),
            ("s-new", 1, _oc("u-1", "user", "How do retries work?"), False),
            ("s-new", 2, _oc("a-1", "assistant", [{"type": "text", "text": long_answer}]), True),
            ("s-new", 3, {"type": "custom", "customType": "openclaw:bootstrap-context:full"}, False),
        ],
    )
    assert detect_format(db) == "openclaw-db"
    result = read_transcript(db, session="s-n")  # a unique prefix is enough
    assert result.session == "s-new" and result.warnings == []
    assert [(t.role, t.uuid, t.text) for t in result.turns] == [
        ("user", "u-1", "How do retries work?"),
        ("assistant", "a-1", long_answer.strip()),
    ]
    shown = run(str(db), "--session", "s-new", "--turn", "u-1")
    assert shown.exit_code == 0 and "How do retries work?" in shown.stdout and "[selected]" in shown.stdout
    many = run(str(db))
    assert many.exit_code != 0 and "holds 2 OpenClaw sessions; choose one with --session" in many.stderr


# --- DeepSeek Harness session artifacts (DSH 0.1.0-rc.8) ------------------------------------------


def _dsh_session(tmp_path: Path, compress: bool = True, name: str = "session.jsonl.zstd") -> Path:
    import dsh_artifact

    log = dsh_artifact.Log()
    log.turn(1, "Which queue does the exporter use?", "It uses the slow queue.")
    log.turn(
        2,
        "Move it to the fast queue.",
        "Moved; the tests pass.",
        tools=[("bash", {"command": "pytest -q tests/test_export.py"}, "3 passed\n")],
    )
    log.user("[memsearch] a note a plugin added", kind="plugin")
    first, *rest = [log.events[:9], log.events[9:]]
    return dsh_artifact.write(
        tmp_path / "sessions" / "--proj--" / "session-1" / name,
        dsh_artifact.header("session-1", "/proj"),
        [first, *rest],
        compress=compress,
    )


@pytest.mark.parametrize("compress", [True, False], ids=["zstd", "plain"])
def test_dsh_session_artifact(tmp_path: Path, compress: bool) -> None:
    path = _dsh_session(tmp_path, compress, "session.jsonl.zstd" if compress else "session.jsonl")
    assert detect_format(path) == "dsh"
    result = read_transcript(path)
    assert result.warnings == []
    assert [(t.role, t.uuid, t.text) for t in result.turns] == [
        ("user", "1", "Which queue does the exporter use?"),
        ("assistant", "answer-1", "It uses the slow queue."),
        ("user", "2", "Move it to the fast queue."),
        ("assistant", "tool-step-2-0", ""),
        ("assistant", "answer-2", "Moved; the tests pass."),
    ]
    assert result.turns[3].tools == [ToolCall("bash", "pytest -q tests/test_export.py", "3 passed")]
    # the anchor's turn number selects the person's message of that turn
    shown = run(str(path), "--turn", "2", "--context", "2")
    assert shown.exit_code == 0, shown.stderr
    assert "### User (2) [selected]\nMove it to the fast queue." in shown.stdout
    assert "- $ [bash] pytest -q tests/test_export.py\n  → 3 passed" in shown.stdout
    assert "runtime context" not in shown.stdout and "a note a plugin added" not in shown.stdout
    assert run(str(path), "--turn", "7").exit_code != 0
    assert run(str(path), "--session", "session-1").exit_code != 0  # one session per file


def test_dsh_artifact_still_being_written(tmp_path: Path) -> None:
    """DSH appends a frame per batch: a frame cut short keeps the frames before it (with a warning);
    the turn whose end is not written yet is read as far as it goes."""
    from memsearch.transcript.dsh import read_dsh_turn

    path = _dsh_session(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[:-9])
    result = read_transcript(path)
    assert any("last compressed frame is incomplete" in w for w in result.warnings)
    assert [t.uuid for t in result.turns][:2] == ["1", "answer-1"]
    turn, warnings = read_dsh_turn(path, 1)
    assert turn is not None and turn.ended and turn.user is not None and warnings
    path.write_bytes(whole)
    turn, warnings = read_dsh_turn(path, 2)
    assert turn is not None and turn.ended and [r.uuid for r in turn.replies] == ["tool-step-2-0", "answer-2"]
    assert read_dsh_turn(path, 3) == (None, [])
    path.write_bytes(whole[:4] + b"\xff" * 40)  # zstd magic, then a frame header no zstd accepts
    damaged = run(str(path))
    assert "cannot decompress past byte 0" in damaged.stderr
