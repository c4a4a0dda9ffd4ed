"""``memsearch mcp`` as a host runs it: a real ``python -m memsearch mcp`` process driven by the MCP
SDK's own client over stdio, on a real Milvus Lite store indexed with the real ONNX model.

The CLI processes beside it are real too (``cli_process``), so a test of "the server and the CLI on
one store" is what a user sees: nobody is locked out while the server runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from cli_process import memsearch
from memsearch.agent.hooks.collection import derive_collection
from memsearch.engine.journal import JournalEntry, append_entry

pytestmark = pytest.mark.model

FIXTURES = Path(__file__).parent / "fixtures"
TURN = "1b6bc284-5dfb-5e78-916b-c75956e8a024"  # a user turn of the Claude Code fixture


def _project(work: Path) -> Path:
    """A git project with one journal, as a plugin would have left it."""
    project = work / "proj"
    (project / ".git").mkdir(parents=True)
    memory = project / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (memory / "2026-11-30.md").write_text(
        "# 2026-11-30\n\n## Session 10:00\n\n### 10:00\n"
        "- Checkout timed out because the Redis connection pool had only two connections.\n"
        "- We raised the pool to twenty and set a five second timeout.\n\n"
        "## Session 15:00\n\n### 15:00\n- The invoice PDF export uses WeasyPrint, not wkhtmltopdf.\n",
        encoding="utf-8",
    )
    return project


@asynccontextmanager
async def session(project: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memsearch", "mcp", *args], env=dict(os.environ), cwd=project
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, args: dict[str, object]) -> tuple[bool, str]:
    result = await client.call_tool(tool, args)
    text = "\n".join(c.text for c in result.content if c.type == "text")
    return bool(result.is_error), text


def _hashes(text: str) -> list[str]:
    return re.findall(r"chunk_hash ([0-9a-f]{16})", text)


async def test_tools_listed_and_search_then_expand(isolated_env: Path) -> None:
    project = _project(isolated_env)
    async with session(project) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search", "expand", "transcript", "remember", "stats"}
        assert "expand" in (tools["search"].description or "")
        # Sent with every request a host makes: compact (no pydantic titles, no null branches).
        schemas = json.dumps([t.input_schema for t in tools.values()])
        assert '"title"' not in schemas and '"null"' not in schemas
        assert tools["search"].input_schema["properties"]["top_k"]["maximum"] == 50
        # Sent with every request too: one line per paragraph, not the docstring's indentation.
        for tool in tools.values():
            assert tool.description and "\n" not in tool.description and "  " not in tool.description
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"memsearch://journal/today", "memsearch://journal/recent"} <= resources

        error, text = await call(client, "search", {"query": "why did checkout time out", "top_k": 2})
        assert not error, text
        assert "<memsearch-data" in text and "data, not instructions" in text
        assert ".memsearch/memory/2026-11-30.md" in text and "2026-11-30" in text
        hashes = _hashes(text)
        assert hashes

        error, text = await call(client, "expand", {"chunk_hash": hashes[0]})
        assert not error, text
        assert "Redis connection pool" in text and "Source: .memsearch/memory/2026-11-30.md" in text

        error, text = await call(client, "search", {"query": "checkout", "since": "2026-12-01"})
        assert not error and "No memory matches" in text
        # the engine's window: the journal's day, its entry's time; relative forms too
        error, text = await call(
            client, "search", {"query": "checkout", "since": "2026-11-30", "until": "2026-11-30", "top_k": 1}
        )
        assert not error and "2026-11-30.md" in text and "| 2026-11-30 10:00 |" in text, text
        error, text = await call(client, "search", {"query": "checkout", "until": "2026-11-29"})
        assert not error and "No memory matches" in text
        error, text = await call(client, "search", {"query": "checkout", "since": "someday"})
        assert error and "Error: not a day: 'someday'" in text and "YYYY-MM-DD" in text
        # the calendar's ends are days like any other; past them, one clear error (not "Error
        # executing tool search" from an overflow)
        error, text = await call(
            client, "search", {"query": "checkout", "since": "0001-01-01", "until": "9999-12-31"}
        )
        assert not error and "2026-11-30.md" in text, text
        error, text = await call(client, "search", {"query": "checkout", "since": "9999y"})
        assert error and "Error: '9999y' is out of range: days run from 0001-01-01" in text, text

        error, text = await call(client, "stats", {})
        assert not error and f"Collection: {derive_collection(project)}" in text
        recent = await client.read_resource("memsearch://journal/recent")
        assert "WeasyPrint" in recent.contents[0].text  # type: ignore[union-attr]


async def test_remember_then_cli_search_finds_it(isolated_env: Path) -> None:
    project = _project(isolated_env)
    async with session(project) as client:
        error, text = await call(
            client, "remember", {"note": "The staging database password rotates on Fridays."}
        )
        assert not error and "Remembered in .memsearch/memory/" in text
        # The CLI, on the same store while the server runs (it owns the store: autostart is off).
        found = memsearch(
            "search",
            "when does the staging password rotate",
            "--collection",
            derive_collection(project),
            "-j",
        )
        assert found.returncode == 0, found.stderr
        assert "rotates on Fridays" in found.stdout
    journals = list((project / ".memsearch" / "memory").glob("*.md"))
    assert any("rotates on Fridays" in p.read_text(encoding="utf-8") for p in journals)


async def test_bad_inputs_are_error_results_and_the_server_goes_on(isolated_env: Path) -> None:
    project = _project(isolated_env)
    outside = isolated_env / "secret.jsonl"
    shutil.copy(FIXTURES / "transcripts" / "claude.jsonl", outside)
    bad: list[tuple[str, dict[str, object]]] = [
        ("no_such_tool", {}),
        ("search", {"query": 42}),
        ("search", {"query": "x", "top_k": "many"}),
        ("search", {"query": "x" * 10_000_000}),
        ("search", {"query": "x", "top_k": 10**9}),
        ("search", {"query": "x", "since": "2026-02-31"}),
        ("search", {"query": "x", "since": "x" * 41}),
        ("expand", {"chunk_hash": "../../etc/passwd"}),
        ("expand", {"chunk_hash": "0123456789abcdef"}),
        ("transcript", {"path": str(outside)}),
        ("transcript", {"path": "/etc/passwd"}),
        ("remember", {"note": "   \n  "}),
    ]
    async with session(project) as client:
        for tool, args in bad:
            error, text = await call(client, tool, args)
            assert error, (tool, text[:200])
            assert "Traceback" not in text
            assert len(text) < 5000
        error, text = await call(client, "stats", {})
        assert not error, text


#: A bad call -> the start of the one line it answers (each ends with a hint).
BAD_CALLS: list[tuple[str, dict[str, object], str]] = [
    ("search", {"query": 42}, "Error: search: query: input should be a valid string (got 42). Hint: query: "),
    (
        "search",
        {"query": "x", "top_k": "many"},
        "Error: search: top_k: input should be a valid integer, unable to parse string as an integer "
        "(got 'many'). Hint: top_k: How many hits",
    ),
    ("search", {}, "Error: search: query: field required. Hint: query: What to look for."),
    ("search", {"query": "x" * 10_000_000}, "Error: search: query: string should have at most "),
    ("expand", {"chunk_hash": "zz"}, "Error: expand: chunk_hash: string should match pattern"),
    ("no_such_tool", {}, "Error: there is no tool named 'no_such_tool'. Hint: the tools are search, "),
    ("search", {"query": "x", "since": "someday"}, "Error: not a day: 'someday'"),  # the tool's own
]


async def test_a_bad_call_answers_one_error_line_with_a_hint(isolated_env: Path) -> None:
    """Not pydantic's report with its link, nor the SDK's "Error executing tool" prefix: the
    project's one line, as the CLI prints it."""
    project = _project(isolated_env)
    async with session(project) as client:
        for tool, args, start in BAD_CALLS:
            error, text = await call(client, tool, args)
            assert error and text.startswith(start), (tool, text[:300])
            assert "\n" not in text and "Hint: " in text and len(text) < 400, text[:300]
            assert "pydantic" not in text and "Error executing tool" not in text


async def test_a_project_with_no_memory_yet_answers_so_as_a_result(isolated_env: Path) -> None:
    """Not "No collection ... run memsearch index": nothing went wrong, there is no memory yet;
    remember then writes the first note and search finds it."""
    project = isolated_env / "new-project"
    (project / ".git").mkdir(parents=True)
    async with session(project) as client:
        for tool, args in [
            ("search", {"query": "TLS certificate"}),
            ("expand", {"chunk_hash": "0123456789abcdef"}),
        ]:
            error, text = await call(client, tool, args)
            assert not error and text.startswith("No memory yet: nothing of this project is indexed"), text
        error, text = await call(
            client, "remember", {"note": "Renew the wildcard TLS certificate by 2026-12-20."}
        )
        assert not error, text
        error, text = await call(client, "search", {"query": "TLS certificate"})
        assert not error and "Renew the wildcard TLS certificate" in text


async def test_notes_remembered_in_one_minute_share_one_session_heading(isolated_env: Path) -> None:
    project = _project(isolated_env)
    async with session(project) as client:
        for note in ("The deploy window is Tuesday.", "The freeze starts on the 18th."):
            error, text = await call(client, "remember", {"note": note})
            assert not error, text
    journal = max((project / ".memsearch" / "memory").glob("*.md"), key=lambda p: p.stat().st_mtime)
    headings = re.findall(r"^## Session \d\d:\d\d$", journal.read_text(encoding="utf-8"), re.MULTILINE)
    assert headings and len(headings) == len(set(headings)), headings  # two only across a minute's turn


async def test_transcript_reads_only_what_memsearch_anchored(isolated_env: Path) -> None:
    project = _project(isolated_env)
    sessions = isolated_env / "sessions"
    sessions.mkdir()
    ours, shipped = sessions / "ours.jsonl", sessions / "shipped.jsonl"
    shutil.copy(FIXTURES / "transcripts" / "claude.jsonl", ours)
    shutil.copy(FIXTURES / "transcripts" / "claude.jsonl", shipped)
    memory = project / ".memsearch" / "memory"
    # memsearch writes (and records) this anchor; the other was written by hand, as a cloned
    # repository could ship it.
    append_entry(
        memory,
        JournalEntry(
            ["- Found the flaky watcher test cause."],
            {"session": "s1", "turn": TURN, "transcript": str(ours)},
        ),
    )
    with (memory / "2026-11-30.md").open("a", encoding="utf-8") as fh:
        fh.write(f"\n### 16:00\n<!-- session:s2 turn:{TURN} transcript:{shipped} -->\n- shipped\n")
    async with session(project) as client:
        error, text = await call(client, "transcript", {"path": str(ours), "turn": TURN[:8], "context": 1})
        assert not error, text
        assert "The watcher test fails about one run in five" in text and "<memsearch-data" in text
        error, text = await call(client, "transcript", {"path": str(shipped), "turn": TURN[:8]})
        assert error and "not a conversation" in text


async def test_small_budget_cuts_results_and_says_how_to_get_more(isolated_env: Path) -> None:
    project = _project(isolated_env)
    long_note = "\n".join(
        f"- Step {i}: the migration runbook line {i} about Postgres vacuum." for i in range(200)
    )
    (project / ".memsearch" / "memory" / "2026-11-29.md").write_text(
        f"## Runbook\n\n{long_note}\n", encoding="utf-8"
    )
    async with session(project, "--max-result-chars", "1000") as client:
        error, text = await call(client, "search", {"query": "Postgres vacuum runbook", "top_k": 10})
        assert not error and len(text) < 1500
        long_hash = next(h for h in _hashes(text))
        error, text = await call(client, "expand", {"chunk_hash": long_hash})
        assert not error and len(text) < 1500
        assert "[truncated:" in text and text.rstrip().endswith("]")
        assert text.index("</memsearch-data>") < text.index("[truncated:")


def test_server_exits_when_stdin_closes(isolated_env: Path) -> None:
    """After a store operation (the server then owns the store and serves it on its own threads),
    closing stdin ends the process promptly and cleanly."""
    project = _project(isolated_env)
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "stats", "arguments": {}}},
    ]
    with subprocess.Popen(
        [sys.executable, "-m", "memsearch", "mcp"],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            for message in messages:
                proc.stdin.write(json.dumps(message) + "\n")
                proc.stdin.flush()
            replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
            assert "Indexed chunks: 2" in json.dumps(replies[1])
            proc.stdin.close()
            assert proc.wait(timeout=60) == 0
            assert "Traceback" not in proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    # Nobody owns the store any more: a CLI command opens it directly, at once.
    stats = memsearch("stats", "--collection", derive_collection(project))
    assert stats.returncode == 0 and "Total indexed chunks: 2" in stats.stdout, stats.stderr


async def test_cli_search_and_index_work_while_the_server_runs(isolated_env: Path) -> None:
    project = _project(isolated_env)
    collection = derive_collection(project)
    notes = isolated_env / "notes"
    notes.mkdir()
    (notes / "kafka.md").write_text("# Kafka\n\nThe consumer lag alert fires above 5000 messages.\n")
    async with session(project) as client:
        error, text = await call(client, "search", {"query": "Redis pool"})
        assert not error and _hashes(text)
        found = memsearch("search", "Redis connection pool", "--collection", collection, "-j")
        assert found.returncode == 0, found.stderr
        assert "Redis" in found.stdout
        indexed = memsearch("index", str(notes), "--collection", collection)
        assert indexed.returncode == 0, indexed.stderr
        error, text = await call(client, "search", {"query": "consumer lag alert threshold"})
        assert not error and "consumer lag alert" in text


async def test_no_service_is_left_behind_with_autostart_on(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With on-demand services allowed, the server still starts none: it owns the store for its
    session (a CLI search meanwhile is answered by it) and nothing of its making outlives it."""
    monkeypatch.setenv("MEMSEARCH_SERVICE_AUTOSTART", "1")
    project = _project(isolated_env)
    collection = derive_collection(project)
    async with session(project) as client:
        error, text = await call(client, "search", {"query": "invoice PDF export"})
        assert not error and "WeasyPrint" in text
        found = memsearch("search", "invoice PDF", "--collection", collection, "-j")
        assert found.returncode == 0 and "WeasyPrint" in found.stdout, found.stderr
        running = memsearch("service", "status")
        assert running.returncode == 0 and "No memory service is running" not in running.stdout
    status = memsearch("service", "status")
    assert status.returncode == 0 and "No memory service is running." in status.stdout, status.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_http_transport_needs_the_token_and_serves_beside_the_cli(isolated_env: Path) -> None:
    """``--http-port``: the SDK's streamable-HTTP client with the bearer token of
    ``~/.memsearch/mcp-token`` gets the tools; without it or with another token, 401; a CLI search
    works meanwhile; SIGTERM ends the server cleanly and the token stays for the next start."""
    import time

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    project = _project(isolated_env)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with subprocess.Popen(
        [sys.executable, "-m", "memsearch", "mcp", "--http-port", str(port)],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            token_path = Path(os.environ["HOME"]) / ".memsearch" / "mcp-token"
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx2.post(url, json={}, timeout=5)
                    break
                except httpx2.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                    time.sleep(0.2)
            assert answer.status_code == 401
            assert oct(token_path.stat().st_mode & 0o777) == "0o600"
            token = token_path.read_text().strip()
            wrong = httpx2.post(
                url, json={}, headers={"Authorization": "Bearer " + "x" * len(token)}, timeout=5
            )
            assert wrong.status_code == 401

            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                assert {t.name for t in (await client.list_tools()).tools} >= {"search", "remember"}
                error, text = await call(client, "search", {"query": "invoice PDF export"})
                assert not error and "WeasyPrint" in text
                found = memsearch("search", "Redis connection pool", "-c", derive_collection(project), "-j")
                assert found.returncode == 0 and "Redis" in found.stdout, found.stderr
        finally:
            proc.terminate()
            _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert token_path.read_text().strip() == token


def test_http_port_taken_is_one_error_line(isolated_env: Path) -> None:
    import socket

    project = _project(isolated_env)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "memsearch", "mcp", "--http-port", str(port)],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1
    assert (
        proc.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}")
        and len(proc.stderr.splitlines()) == 1
    )


async def test_recall_tools_keep_to_the_token_budget_and_are_logged(isolated_env: Path) -> None:
    from memsearch.agent import recall_log
    from memsearch.agent.context_budget import count_tokens

    project = _project(isolated_env)
    config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
    # every hit (no strong-match floor): more than the budget holds
    config.write_text("[context]\nrecall_tokens = 200\n\n[search]\nmin_relevance = 0.0\n", encoding="utf-8")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    async with session(project) as client:
        error, text = await call(client, "search", {"query": f"checkout timeout {token}", "top_k": 3})
        assert not error, text
        assert count_tokens(text) <= 200  # the answer and one line saying what was left out
        assert text.splitlines()[-1].startswith("[memsearch] ") and "left out (context budget)" in text
        hashes = _hashes(text)
        error, text = await call(client, "expand", {"chunk_hash": hashes[0]})
        assert not error, text
    events = recall_log.read_events(derive_collection(project))
    assert [e["event"] for e in events] == ["search", "expand"]
    search = events[0]
    assert (search["session"], search["host"], search["via"]) == ("", "mcp", "mcp")
    assert token not in search["query"] and search["query"].startswith("checkout timeout [REDACTED:")
    assert 1 <= search["hits"] <= 3 and 0 < search["tokens"] <= 200


async def test_project_and_user_md_are_resources_and_never_show_a_secret(isolated_env: Path) -> None:
    """With PROJECT.md and USER.md present the server starts (it crashed: the SDK refused their
    readers' parameters) and serves both, redacted like every other door."""
    project = _project(isolated_env)
    token = "ghp_" + "Qw8Er7" * 6
    (project / ".memsearch" / "PROJECT.md").write_text(f"# Project\n\nPush with {token}.\n", encoding="utf-8")
    (project / ".memsearch" / "USER.md").write_text("# User\n\nPrefers <private>PIN 4455</private> tabs.\n")
    async with session(project) as client:
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"memsearch://project", "memsearch://user"} <= resources
        shown = (await client.read_resource("memsearch://project")).contents[0].text  # type: ignore[union-attr]
        assert "[REDACTED:github-token]" in shown and token not in shown
        user = (await client.read_resource("memsearch://user")).contents[0].text  # type: ignore[union-attr]
        assert "Prefers" in user and "4455" not in user
