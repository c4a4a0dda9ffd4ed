"""Privacy end to end: a corpus of synthetic secrets (tests/fixtures/privacy/corpus.py, 36 values in
30 formats) goes through every boundary on real parts, and then every byte memsearch wrote and
every request a fake model received is searched for each value: none may be there.

The boundaries, in one test so the real ONNX model and Milvus Lite are paid for once:
capture (a real ``memsearch hook claude-code stop`` process, its summariser a fake ``claude`` on
PATH that logs the prompt it was sent), an entirely private turn (no summary, no entry),
``memsearch index`` of a hand-written note (the store, its BM25 text and the embedding cache), the
MCP ``remember`` tool (the SDK's client on a real ``memsearch mcp``), and maintenance (PROJECT.md
and a skill draft from a fake model API that answers with secrets in them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "privacy"))

import corpus
from corpus import S
from hookkit import CLAUDE_SESSION, HookEnv, hook_json, load_stdin

from fake_model_api import Answer, FakeModelAPI, ModelCall, model_api
from memsearch import redact
from memsearch.agent.hooks.events import SYNC_ENV

pytestmark = pytest.mark.model
__all__ = ["model_api"]  # the fixture, used by name

SESSION = "7c1e9a52-3b4d-4f60-9a8e-0d2c4b6e8f10"


def _session_with(path: Path, *, user: str, reply: str, command: str, tool_output: str, prefix: str) -> None:
    """The Claude Code fixture session with the last turn's prompt, answer, command and tool output
    extended; ``prefix`` renames the entries (a new turn for the duplicate check)."""
    lines = []
    for raw in CLAUDE_SESSION.read_text(encoding="utf-8").splitlines():
        entry = json.loads(raw.replace("a1f0c6d2-", prefix))
        content = entry.get("message", {}).get("content")
        if isinstance(content, list):
            for block in content:
                if block.get("text", "").startswith("Switch totals.py"):
                    block["text"] = user
                elif block.get("text", "").startswith(("I'll change", "Totals now use")):
                    block["text"] = reply
                elif block.get("type") == "tool_use" and block["name"] == "Bash":
                    block["input"]["command"] = command
                elif block.get("type") == "tool_result" and "SECRET-TOOL-OUTPUT-3" in str(
                    block.get("content")
                ):
                    block["content"] = tool_output
        lines.append(json.dumps(entry, ensure_ascii=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(model_url: str) -> str:
    text = f'[llm.providers.fake]\ntype = "anthropic"\nbase_url = "{model_url}"\napi_key = "k"\nmodel = "m"\n'
    for task in ("project_review", "memory_to_skill"):
        text += f'\n[plugins.claude-code.{task}]\nenabled = true\nprovider = "fake"\nmin_interval_hours = 0\n'
    return text + "min_occurrences = 1\n"


def _answer(call: ModelCall) -> Answer:
    """A model that puts secrets into what it writes back."""
    text = call.messages[0].text if call.messages else ""
    if "draft skills" in text:
        body = f"# Release\n\n1. `export NPM_TOKEN={S['npm-token']}`\n2. Push with {S['github-token']}.\n"
        skill = {"name": "release", "description": f"Release with {S['stripe-key']}", "body": body}
        return Answer(text=json.dumps({"skills": [{**skill, "occurrences": 3, "sources": ["x.md"]}]}))
    content = f"# Project\n\nDeploys use {S['aws-access-key']}.\n\n{corpus.PEM_BLOCK}\n"
    return Answer(text=json.dumps({"action": "replace", "reason": "r", "content": content}))


async def test_the_secrets_corpus_never_reaches_memory(
    tmp_path: Path, model_api: FakeModelAPI, warm_caches: Path
) -> None:
    world = HookEnv(tmp_path / "t", None, extra_env={SYNC_ENV: "1", "MEMSEARCH_SERVICE_AUTOSTART": "0"})
    try:
        for name in ("onnx-optimized", "cache"):  # the warmed ONNX graph, as every test HOME has
            if (warm_caches / name).is_dir():
                shutil.copytree(warm_caches / name, world.home / ".memsearch" / name)
        world.write_config(_config(model_api.url))
        model_api.on(lambda call: True, _answer)

        # capture: prompt, answer, a command with a header, tool output (never sent anyway)
        transcript = world.root / "claude-projects" / f"{SESSION}.jsonl"
        user = "Switch totals.py to Decimal.\n" + corpus.PROMPT
        _session_with(
            transcript,
            user=user,
            reply=corpus.REPLY,
            command=corpus.COMMAND,
            tool_output=corpus.TOOL_OUTPUT,
            prefix="a1f0c6d2-",
        )
        stdin = load_stdin("claude-stop.json", TRANSCRIPT=str(transcript), CWD=str(world.project))
        proc = world.hook("claude-code", "stop", stdin)
        assert hook_json(proc) == {}, proc.stderr
        (call,) = world.agent_calls()
        sent = str(call["stdin"])
        assert "[REDACTED:openai-api-key]" in sent and "[REDACTED:authorization]" in sent
        assert "my bank PIN" not in sent  # the private span never travels
        journal = world.journal()
        assert journal.count("### ") == 1

        # an entirely private turn: no summariser call, no entry
        private = world.root / "claude-projects" / "private.jsonl"
        _session_with(
            private,
            user="<private>the merger plan</private>",
            reply="<PRIVATE>noted</PRIVATE>",
            command="ls",
            tool_output="x",
            prefix="b2f0c6d2-",
        )
        stdin = load_stdin("claude-stop.json", TRANSCRIPT=str(private), CWD=str(world.project))
        assert hook_json(world.hook("claude-code", "stop", stdin)) == {}
        assert world.journal() == journal and len(world.agent_calls()) == 1

        # index of a hand-written note (the user's file: never rewritten; the store redacted)
        notes = world.root / "notes"
        notes.mkdir()
        (notes / "deploy.md").write_text(corpus.NOTE, encoding="utf-8")
        proc = world.memsearch("index", str(notes))
        assert proc.returncode == 0, proc.stderr
        assert (notes / "deploy.md").read_text(encoding="utf-8") == corpus.NOTE
        found = world.memsearch("search", "部署密钥 private key", "--json-output")
        assert "[REDACTED:private-key]" in found.stdout, found.stderr

        # the MCP remember tool
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memsearch", "mcp"], env=world.env(), cwd=world.project
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            note = f"{corpus.REPLY}\n{corpus.TOOL_OUTPUT}"
            result = await client.call_tool("remember", {"note": note})
            assert not result.is_error and "Remembered" in str(result.content)
            result = await client.call_tool("remember", {"note": "<private>only this</private>"})
            assert "entirely <private>" in str(result.content)

        # maintenance: a hand-edited PROJECT.md with a secret goes to the model redacted, and
        # what the model writes back is redacted before it is written
        (world.memsearch_dir / "PROJECT.md").write_text(
            f"# Project\nkey {S['gitlab-token']}\n", encoding="utf-8"
        )
        proc = world.memsearch("maintenance", "run")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "[REDACTED:private-key]" in (world.memsearch_dir / "PROJECT.md").read_text(encoding="utf-8")
        assert len(model_api.snapshot()) >= 2

        requests = world.root / "requests.jsonl"
        requests.write_text(
            "".join(json.dumps(c.body) + "\n" for c in model_api.snapshot()), encoding="utf-8"
        )
        assert corpus.hits(world.project, world.root / "direct", world.home, world.log, requests) == []
        stats = world.memsearch("stats")
        assert "Redacted so far" in stats.stdout and "summary:" in stats.stdout, stats.stdout + stats.stderr
    finally:
        world.cleanup()


def test_journal_seam_redacts_and_skips_an_entirely_private_entry(tmp_path: Path) -> None:
    from memsearch.engine.journal import JournalEntry, append_entry

    memory = tmp_path / "memory"
    # a key block split over two bullets is still found whole
    lines = corpus.PEM_BLOCK.splitlines()
    result = append_entry(memory, JournalEntry([f"- token {S['github-token']}", *lines]))
    text = result.path.read_text(encoding="utf-8")
    assert result.written and "[REDACTED:github-token]" in text and "[REDACTED:private-key]" in text
    assert corpus.kinds_in(text) == set()
    assert not append_entry(memory, JournalEntry(["<private>a", "b</private>"])).written
    assert redact.counts()["capture"] == {"github-token": 1, "private-key": 1, "private": 1}


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_index_notes_warn_or_skip(tmp_path: Path, mode: str) -> None:
    from memsearch.redact import Redactor, note_text

    warnings: list[str] = []
    text = note_text(Redactor(notes=mode), corpus.NOTE, "deploy.md", warnings)
    assert len(warnings) == 1 and "deploy.md" in warnings[0] and f"redact.notes = {mode}" in warnings[0]
    if mode == "skip":
        assert text is None
    else:
        assert text is not None and S["github-token"] in text and S["private-span"] not in text


def test_redaction_off_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSEARCH_REDACT", "0")
    assert redact.current().redact(corpus.PROMPT).text == corpus.PROMPT
    os.environ.pop("MEMSEARCH_REDACT")
    assert redact.current().redact(corpus.PROMPT).text != corpus.PROMPT
