"""Fuzzing the parsers that read data from outside: nothing but our own errors may come out.

What is fuzzed, each with data no test author would write by hand:

- the chunker (``chunk_markdown``): arbitrary text with headings, fences, CRLF/CR, control
  characters and very long lines, checking the chunks' invariants too;
- the transcript readers (``read_transcript``): Claude Code, Codex and OpenClaw JSONL built from
  arbitrary JSON values, arbitrary bytes, and OpenCode/OpenClaw SQLite databases with arbitrary
  row values (and garbage after the SQLite header);
- hook stdin: ``parse_stdin`` and every platform's ``read_input`` and ``project_dir``;
- the memory service's message decoding (``decode_message``, then ``error_from_payload`` as the
  client applies them; the server's request parser is covered by tests/test_service.py's
  garbage cases);
- the config loader: arbitrary TOML text and arbitrary TOML tables through ``resolve_config``
  (and whatever it accepts has every number finite and inside its declared range);
- the ``MEMSEARCH_*`` variables that hold a yes/no or a number (``env_setting``), with arbitrary text.

"Nothing but our own errors" means: a call returns, or raises a
:class:`~memsearch.errors.MemSearchError` subclass (which the CLI prints as one ``Error:`` line).

Run time: the default profile ("ci") runs few examples per test so the module takes well under
30 s, without deadlines (a slow CI machine must not flake) and without an example database.
For a longer run by hand::

    HYPOTHESIS_PROFILE=long .venv/bin/pytest tests/test_fuzz.py

("long": 2,000 examples per test, and the example database in ``.hypothesis/`` so a failure found
once is replayed first next time.)
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsearch.agent.hooks.engine import parse_stdin
from memsearch.agent.hooks.platforms import PLATFORMS
from memsearch.chunker import chunk_markdown, split_lines
from memsearch.config import MemSearchConfig, config_to_dict, resolve_config
from memsearch.config.envvars import env_setting
from memsearch.config.schema import ENV_VARIABLES, RANGES
from memsearch.config.tables import leaves
from memsearch.errors import MemSearchError
from memsearch.service.protocol import decode_message, error_from_payload
from memsearch.transcript import format_turns, read_transcript, turns_to_json

_COMMON = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
settings.register_profile("ci", _COMMON, max_examples=40, database=None)
settings.register_profile("long", _COMMON, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# --- strategies ---------------------------------------------------------------------------------


def _containers(size: int) -> Any:
    """The ``extend`` of a recursive strategy: non-empty lists and objects of ``children``.

    A named function: hypothesis checks that ``extend`` uses its argument by reading its source,
    which fails for a lambda ruff formats over several lines (it then refuses the strategy).
    """

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.lists(children, min_size=1, max_size=size) | st.dictionaries(
            st.text(max_size=12), children, min_size=1, max_size=size
        )

    return extend


#: Any JSON value (nested a few levels).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from([[], {}]),
    _containers(4),
    max_leaves=12,
)

#: Pieces markdown is made of, and the characters that trip line-based parsers.
_MD_PIECES = st.sampled_from(
    [
        "# Title",
        "## 10:30",
        "###### deep",
        "####### not a heading",
        "#tag",
        "```",
        "```python",
        "````",
        "~~~",
        "  ```",
        "<!-- session:abc turn:def -->",
        "<!--",
        "-->",
        "\n",
        "\r\n",
        "\r",
        "\n\n\n",
        "\t",
        "\x00",
        "\x0b\x0c",
        "\x1c\x1d\x1e\x85",
        "\u2028\u2029",
        "\ufeff",
        "\ud800",
        "。",
        "v1.2.3. ",
        "…",
        "- item",
        "> quote",
    ]
)
markdown = st.lists(
    _MD_PIECES
    | st.text(max_size=30)
    | st.builds(lambda c, n: c * n, st.sampled_from(["a", "字", " ", ".", "#", "`"]), st.integers(0, 5000)),
    max_size=40,
).map("".join)

#: An entry of each JSONL format, with arbitrary values where the parsers look.
_claude_block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking"]) | json_values},
    optional={k: json_values for k in ("text", "id", "name", "input", "tool_use_id", "content", "is_error")},
)
_claude_entry = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["user", "assistant"]),
        "message": json_values
        | st.fixed_dictionaries(
            {"role": json_values, "content": json_values | st.text() | st.lists(_claude_block, max_size=3)},
            optional={"id": json_values},
        ),
    },
    optional={"uuid": json_values, "isMeta": json_values, "timestamp": json_values},
)
_codex_entry = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["event_msg", "response_item", "session_meta", "turn_context"]),
        "payload": st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    [
                        "user_message",
                        "agent_message",
                        "item_completed",
                        "message",
                        "task_started",
                        "task_complete",
                        "function_call",
                        "function_call_output",
                        "custom_tool_call",
                        "custom_tool_call_output",
                        "web_search_call",
                        "reasoning",
                    ]
                )
            },
            optional={
                "turn_id": json_values,
                "message": json_values,
                "role": json_values,
                "content": json_values,
                "item": json_values,
                "name": json_values,
                "arguments": json_values,
                "input": json_values,
                "call_id": json_values,
                "output": json_values,
                "action": json_values,
            },
        ),
    }
)
_openclaw_entry = st.fixed_dictionaries(
    {
        "type": st.just("message"),
        "message": st.fixed_dictionaries(
            {"role": json_values},
            optional={"content": json_values | st.lists(json_values, max_size=3), "toolCallId": json_values},
        ),
    },
    optional={"id": json_values, "parentId": json_values},
)
entries = st.lists(_claude_entry | _codex_entry | _openclaw_entry | json_values, max_size=8)


def _jsonl(items: list[Any], tail: bytes) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items) + tail


def read_and_render(path: Path, session: str | None = None) -> None:
    """What ``memsearch transcript`` does with a file: read it, then render it as text and JSON."""
    transcript = read_transcript(path, session=session)
    for turn in transcript.turns:
        assert isinstance(turn.uuid, str) and isinstance(turn.text, str), turn
    json.dumps(turns_to_json(transcript.turns), ensure_ascii=False).encode("utf-8")
    format_turns(transcript.turns, selected=transcript.turns[-1].uuid if transcript.turns else None)
    format_turns(transcript.turns, max_chars=50)
    assert all(isinstance(w, str) for w in transcript.warnings)


def assert_only_our_errors(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; a MemSearchError is fine, anything else fails the test (with the input)."""
    try:
        return fn(*args, **kwargs)
    except MemSearchError:
        return None


# --- the chunker --------------------------------------------------------------------------------


#: File names as the indexer sees them: a name that is not UTF-8 arrives with lone surrogates.
sources = st.sampled_from(["/notes/x.md", "/notes/n\udcffote.md", "/n/\ud800.md", ""]) | st.text(max_size=12)


@given(text=markdown, source=sources, max_size=st.integers(1, 2000), overlap=st.integers(-2, 6))
@example(text="# a\n" + "x" * 5000 + "\n```\n# b\n", source="/x.md", max_size=7, overlap=2)
@example(text="\r\n\r\r\n# h\r\n\x00", source="/x.md", max_size=1, overlap=0)
@example(text="####### not a heading\ud800", source="/x.md", max_size=1, overlap=0)  # found by this test
@example(text="# t\n\nhello\n", source="/notes/n\udcffote.md", max_size=1500, overlap=2)  # found by this test
def test_chunker_on_arbitrary_text(text: str, source: str, max_size: int, overlap: int) -> None:
    chunks = chunk_markdown(text, source, max_chunk_size=max_size, overlap_lines=overlap)
    n_lines = len(split_lines(text))
    ids = [c.chunk_id("m") for c in chunks]
    assert len(ids) == len(set(ids))
    for c in chunks:
        assert c.content and c.content == c.content.strip()
        assert len(c.content) <= max_size
        assert "\r" not in c.content
        assert 1 <= c.start_line <= c.end_line <= n_lines
        assert 0 <= c.heading_level <= 6


# --- transcripts --------------------------------------------------------------------------------


@given(items=entries, tail=st.binary(max_size=20))
def test_jsonl_transcripts_from_arbitrary_json(tmp_path: Path, items: list[Any], tail: bytes) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(_jsonl(items, tail))
    assert_only_our_errors(read_and_render, path)


@given(data=st.binary(max_size=300))
@example(data=b"SQLite format 3\x00" + b"\x00" * 84)
@example(data=b"\xef\xbb\xbf{}\n")
@example(data=b"[" * 3000 + b"\n")  # found by this test
def test_transcripts_from_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(data)
    assert_only_our_errors(read_and_render, path)


_sql_values = st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=30) | st.binary(max_size=30)
_json_text = json_values.map(json.dumps) | st.text(max_size=30)
_row_data = _json_text | _sql_values


@given(
    messages=st.lists(st.tuples(st.text(max_size=5), _sql_values, _row_data), max_size=5),
    parts=st.lists(st.tuples(st.text(max_size=5), _row_data), max_size=6),
    session=st.none() | st.text(max_size=5),
)
def test_opencode_database_with_arbitrary_rows(
    tmp_path: Path, messages: list[tuple[str, Any, Any]], parts: list[tuple[str, Any]], session: str | None
) -> None:
    path = tmp_path / f"oc-{os.urandom(4).hex()}.db"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE message (id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER,"
        " data TEXT); CREATE TABLE part (id TEXT, message_id TEXT, session_id TEXT,"
        " time_created INTEGER, time_updated INTEGER, data TEXT);"
    )
    for k, (mid, sid, data) in enumerate(messages):
        con.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", (mid, sid, k, k, data))
    for k, (mid, data) in enumerate(parts):
        con.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (f"p{k}", mid, "s", k, k, data))
    con.commit()
    con.close()
    assert_only_our_errors(read_and_render, path, session=session)


@given(
    rows=st.lists(
        st.tuples(_sql_values, _sql_values, st.none() | _json_text | _sql_values, _sql_values, _sql_values),
        max_size=6,
    ),
    session=st.none() | st.text(max_size=5),
)
@example(rows=[(0, None, "{}", None, None)], session=None)  # found by this test (seq NULL)
def test_openclaw_database_with_arbitrary_rows(
    tmp_path: Path, rows: list[tuple[Any, ...]], session: str | None
) -> None:
    path = tmp_path / f"openclaw-{os.urandom(4).hex()}.sqlite"
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, created_at INTEGER,"
        " event_zstd BLOB, event_utf8_bytes INTEGER, navigation_json TEXT)"
    )
    for session_id, seq, text, created, packed in rows:
        con.execute(
            "INSERT INTO transcript_events VALUES (?, ?, ?, ?, ?, NULL, NULL)",
            (session_id, seq, text, created, packed),
        )
    con.commit()
    con.close()
    assert_only_our_errors(read_and_render, path, session=session)


@given(cut=st.integers(100, 4000), garbage=st.binary(min_size=1, max_size=64))
def test_damaged_sqlite_transcripts(tmp_path: Path, cut: int, garbage: bytes) -> None:
    """A database cut short or overwritten after its header (a copy taken mid-write)."""
    for name, schema in (
        (
            "oc.db",
            "CREATE TABLE message (id, session_id, time_created, time_updated, data);"
            " CREATE TABLE part (id, message_id, session_id, time_created, time_updated, data);"
            " INSERT INTO message VALUES ('m', 's', 1, 1, '{\"role\": \"user\"}');",
        ),
        (
            "oclaw.sqlite",
            "CREATE TABLE transcript_events (session_id, seq, event_json, created_at,"
            " event_zstd, event_utf8_bytes, navigation_json);"
            " INSERT INTO transcript_events VALUES ('s', 1, '{}', 1, NULL, NULL, NULL);",
        ),
    ):
        path = tmp_path / name
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path)
        con.executescript(schema)
        con.close()
        data = bytearray(path.read_bytes()[:cut])
        data[100 : 100 + len(garbage)] = garbage
        path.write_bytes(bytes(data))
        assert_only_our_errors(read_and_render, path)


# --- hook stdin ---------------------------------------------------------------------------------


_hook_fields = st.fixed_dictionaries(
    {},
    optional={
        name: json_values
        for name in (
            "session_id",
            "sessionId",
            "transcript_path",
            "sessionFile",
            "cwd",
            "workspaceDir",
            "prompt",
            "turn_id",
            "last_assistant_message",
            "source",
            "stop_hook_active",
            "agent_id",
            "agentId",
            "hook_event_name",
        )
    },
)
_stdin = (
    st.binary(max_size=200)
    | st.text(max_size=200)
    | _hook_fields.map(json.dumps)
    | json_values.map(json.dumps)
)


@given(stdin=_stdin)
@example(stdin=b"[" * 3000)  # found by this test
@example(stdin='{"cwd": "/tmp/\\u0000x", "workspaceDir": "\\ud800"}')
def test_hook_stdin_of_every_platform(tmp_path: Path, stdin: bytes | str) -> None:
    data, warning = parse_stdin(stdin)
    assert isinstance(data, dict) and isinstance(warning, str)
    env = {"HOME": str(tmp_path), "CLAUDE_PROJECT_DIR": str(tmp_path)}
    for platform in PLATFORMS.values():
        hook_input = platform.read_input(data)
        assert_only_our_errors(platform.project_dir, hook_input, env)


# --- the memory service's messages --------------------------------------------------------------


@given(message=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
@example(message=b'{"ok": false, "error": {"type": "StoreError", "exit_code": "x"}}')
@example(message=b'{"ok": false, "error": {"type": "Nope", "message": 1, "hint": null}}')
@example(message=b'{"ok": true, "result": [1]}')
@example(message=b"\xff\xfe{}")
@example(message=b"[" * 3000)  # nested past the parser's depth (was a RecursionError)
@example(message=b'{"ok": false, "error": [1]}')  # an error that is not an object (was AttributeError)
@example(message=b'{"ok": false, "error": {"type": "Nope", "exit_code": 1e999}}')  # was OverflowError
def test_service_message_decoding(message: bytes) -> None:
    """What a peer sends on the service socket: a line is a JSON object or nothing (never an
    exception), and an error reply becomes one of our error classes, whatever its fields hold."""
    reply = decode_message(message)
    if reply is None or reply.get("ok"):
        return
    assert isinstance(error_from_payload(reply.get("error")), MemSearchError)


# --- config -------------------------------------------------------------------------------------

_CONFIG_KEYS = {
    "milvus": ["uri", "token", "collection", "lock_timeout"],
    "embedding": ["provider", "model", "batch_size", "base_url", "api_key", "timeout"],
    "service": ["autostart", "idle_timeout", "max_on_demand"],
    "chunking": ["max_chunk_size", "overlap_lines"],
    "indexing": ["ignore_files", "exclude"],
    "watch": ["debounce_ms"],
    "reranker": ["model"],
    "llm": ["provider", "model", "base_url", "api_key", "providers"],
    "compact": ["llm_provider", "llm_model", "prompt_file", "base_url", "api_key"],
    "prompts": ["compact"],
    "plugins": ["claude-code", "codex", "summarize", "recall"],
}
_toml_values = st.recursive(
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=True)
    | st.sampled_from([float("inf"), float("-inf"), 10**13, 2**63 - 1, 1e300])
    | st.text(max_size=20)
    | st.sampled_from(
        ["env:HOME", "env:NO_SUCH_VAR_XYZ", "env:", "onnx", "openai", "hash", "~/x.db", [], {}]
    ),
    _containers(3),
    max_leaves=8,
)
_config_tables = st.dictionaries(
    st.sampled_from(sorted(_CONFIG_KEYS)) | st.text(max_size=8),
    st.dictionaries(
        st.sampled_from(sorted({k for keys in _CONFIG_KEYS.values() for k in keys})) | st.text(max_size=8),
        _toml_values,
        max_size=4,
    )
    | _toml_values,
    max_size=4,
)


def _write_configs(home: Path, work: Path, global_text: str | bytes, project_text: str | bytes) -> None:
    (home / ".memsearch").mkdir(exist_ok=True)
    for path, text in (
        (home / ".memsearch" / "config.toml", global_text),
        (work / ".memsearch.toml", project_text),
    ):
        path.write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)


@given(global_text=st.text(max_size=200) | st.binary(max_size=100), project_text=st.text(max_size=100))
@example(global_text="[milvus]\nuri = 1\n", project_text="[chunking]\nmax_chunk_size = -1\n")
@example(global_text="a = " + "[" * 3000, project_text="")  # found by this test
def test_config_from_arbitrary_text(isolated_env: Path, global_text: str | bytes, project_text: str) -> None:
    _write_configs(Path(os.environ["HOME"]), isolated_env, global_text, project_text)
    assert_only_our_errors(resolve_config, cwd=isolated_env)


@given(global_table=_config_tables, project_table=_config_tables, overrides=_config_tables)
def test_config_from_arbitrary_tables(
    isolated_env: Path, global_table: dict[str, Any], project_table: dict[str, Any], overrides: dict[str, Any]
) -> None:
    _write_configs(
        Path(os.environ["HOME"]), isolated_env, tomli_w.dumps(global_table), tomli_w.dumps(project_table)
    )
    cfg = assert_only_our_errors(resolve_config, overrides, cwd=isolated_env)
    if cfg is not None:
        assert_numbers_in_range(cfg)


def assert_numbers_in_range(cfg: MemSearchConfig) -> None:
    """Every number of an accepted configuration is finite and inside its declared range."""
    for key, value in leaves(config_to_dict(cfg)):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isfinite(value), key
            low, high = RANGES.get(key.rsplit(".", 1)[-1], (-math.inf, math.inf))
            assert low <= value <= high, (key, value)


@given(
    name=st.sampled_from(sorted(ENV_VARIABLES)),
    value=st.text(max_size=30)
    | st.sampled_from(["inf", "-inf", "nan", "1e400", "0x10", "1_000", " TRUE ", "Off", "١٢", "10" * 20]),
)
@example(name="MEMSEARCH_SERVICE_TIMEOUT", value="inf")
@example(name="MEMSEARCH_NO_SERVICE", value="false")
def test_environment_variables_from_arbitrary_text(name: str, value: str) -> None:
    """A variable's value is its type and inside its range, or one of our errors; never anything else."""
    value_read = assert_only_our_errors(env_setting, name, {name: value})
    spec = ENV_VARIABLES[name]
    if value_read is None:
        return
    assert type(value_read) is spec.type, (name, value, value_read)
    if spec.type is not bool:
        low, high = RANGES[spec.range]
        assert math.isfinite(value_read) and low <= value_read <= high


@pytest.mark.parametrize("profile", ["ci", "long"])
def test_profiles_are_registered(profile: str) -> None:
    """The profile names the docstring tells people to use exist (a typo would silently run the default)."""
    assert settings.get_profile(profile).deadline is None
