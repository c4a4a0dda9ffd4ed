"""Every door memory text leaves by passes the redaction of the exits (``memsearch.exits``).

The secrets corpus (tests/fixtures/privacy/corpus.py) is planted on disk, bypassing capture, the way
the original memsearch, an older version, a person or another tool leave it: a journal in the
original's format (anchors and all), a hand-written note with ``<private>`` spans (one spanning a
heading), PROJECT.md and USER.md, a Claude Code transcript the journal points at, and a skill
candidate; and an index built with redaction off (``MEMSEARCH_REDACT=0``, as the original builds
one), so the store itself holds the secrets. Then every door is driven with real processes: the
CLI, a program's ``MemSearch``, ``memsearch mcp`` through the SDK's client (which owns the store
meanwhile: the CLI and the hooks reach it through its socket), the hooks of every host, maintenance
and ``compact`` with a fake model API. No secret value may be in any output, in any request to the
model, or in any file memsearch wrote outside the planted ones; and each door must have redacted
something (its count in ``~/.memsearch/redactions.json``).

Which doors there are is not a list kept here: the CLI's command table, the MCP server's tools and
resources, every host's events, the memory's operations and ``exits.DOORS`` are read from the
package, and each entry must be driven below or say why it shows no memory text.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "privacy"))

import corpus
from corpus import S

from fake_model_api import Answer, FakeModelAPI, ModelCall, model_api

pytestmark = pytest.mark.model
__all__ = ["model_api"]  # the fixture, used by name

SRC = Path(__file__).resolve().parent.parent / "src" / "memsearch"
SESSION = "4b0d1c2e-aaaa-4bbb-8ccc-00000000e837"
TURN = "4b0d1c2e-0002"

#: CLI commands: driven below, or why nothing they print is memory text.
CLI_COMMANDS = {
    "search": "driven",
    "expand": "driven",
    "recent": "driven",
    "transcript": "driven",
    "forget": "driven (--dry-run previews)",
    "scan": "driven (path, line and kind, never a value)",
    "compact": "driven (its prompt to the model, the summary it prints)",
    "maintenance": "driven (its prompt to the model, its memory tool's output)",
    "skills": "driven (list)",
    "stats": "driven",
    "hook": "driven (every host's session-start and prompt-submit)",
    "mcp": "driven",
    "index": "counts, paths and per-file errors",
    "watch": "what index prints, as files change",
    "reset": "a confirmation",
    "config": "settings, secrets among them masked (config/edit.py)",
    "serve": "the service's own lines",
    "service": "services: PIDs, stores, command lines",
    "summarize": "the summary of a transcript read from stdin (the capture side: boundary 'summary')",
    "ui": "driven (every page and JSON answer: the door 'console'; more in tests/test_console.py)",
}
#: Host events: driven below, or what they show instead.
HOST_EVENTS = {
    "session-start": "driven",
    "prompt-submit": "driven",
    "stop": "capture: writes the journal (redacted as it is written), shows nothing",
    "session-end": "shows nothing",
}
#: The memory's operations (``Memory``/``MemSearch``): driven, or what they return.
OPERATIONS = {
    "search": "driven",
    "expand": "driven",
    "get_chunk": "a row as stored, for forget to compare with its file (previews pass forget's redaction)",
    "query_chunks": "rows as stored, for compact (its prompt passes the 'compact' door) and forget",
    "index_with_report": "counts",
    "index_file": "a count",
    "remove_file": "counts",
    "count": "a count",
    "reset": "nothing",
    "purge": "counts (files rewritten, rows dropped)",
}
#: Doors that catch what another door should have caught (nothing reaches them unredacted when the
#: others work): the frame around any model-bound text, and the maintenance prompt as a whole.
SAFETY_NETS = {"model", "maintenance"}


def _hook_stdin(platform: str, event: str, project: Path) -> str:
    """What each host sends (the fields the hooks read); a host not here fails the test."""
    prompt = "What is the staging database password and the deploy token?"
    stdin: dict[str, Callable[[], dict[str, object]]] = {
        "claude-code": lambda: {"session_id": SESSION, "cwd": str(project), "prompt": prompt},
        "codex": lambda: {"session_id": SESSION, "cwd": str(project), "prompt": prompt},
        "opencode": lambda: {"cwd": str(project)},
        "openclaw": lambda: {"sessionId": SESSION, "agentId": "main", "workspaceDir": str(project)},
        "dsh": lambda: {
            "session_id": SESSION,
            "cwd": str(project),
            "turn": 1,
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        },
    }
    return json.dumps(stdin[platform]())


# --- planting -----------------------------------------------------------------------------------


def _transcript(path: Path) -> None:
    """A Claude Code session whose turns hold secrets (prompt, tool output, answer)."""

    def entry(kind: str, uuid: str, parent: str | None, content: object) -> str:
        return json.dumps(
            {
                "parentUuid": parent,
                "type": kind,
                "uuid": uuid,
                "sessionId": SESSION,
                "cwd": str(path.parent),
                "timestamp": "2026-03-24T09:12:00.000Z",
                "message": {"role": "user" if kind == "user" else "assistant", "content": content},
            }
        )

    lines = [
        entry("user", "4b0d1c2e-0001", None, "Deploy it:\n" + corpus.PROMPT),
        entry(
            "assistant",
            TURN,
            "4b0d1c2e-0001",
            [
                {"type": "text", "text": corpus.REPLY},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": corpus.COMMAND}},
            ],
        ),
        entry(
            "user",
            "4b0d1c2e-0003",
            TURN,
            [{"type": "tool_result", "tool_use_id": "t1", "content": corpus.TOOL_OUTPUT}],
        ),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _plant(project: Path, transcript: Path) -> list[Path]:
    """The corpus on disk, as others leave it; the planted files."""
    memsearch_dir = project / ".memsearch"
    memory = memsearch_dir / "memory"
    memory.mkdir(parents=True)
    bullets = "\n".join(f"- {line}" for line in (corpus.SHAPES + "\n" + corpus.TOOL_OUTPUT).splitlines())
    journal = memory / "2026-03-24.md"
    journal.write_text(
        "# 2026-03-24\n\n## Session 09:12\n\n### 09:12\n"
        f"<!-- session:{SESSION} turn:{TURN} transcript:{transcript} -->\n"
        f"- Partner API token: {S['github-token']}\n- Staging uses {S['openai-api-key']}.\n{bullets}\n",
        encoding="utf-8",
    )
    note = memory / "notes.md"
    note.write_text(
        "# Team notes\n\n## Access\n\nThe vault is opened with this:\n<private>\nPIN 4455\n\n"
        f"## Rotation\n\n{S['private-span']} rotates on Fridays.\n</private>\n\n"
        f"## Keys\n\nOPENAI_API_KEY={S['openai-legacy-key']}\n\n{corpus.NOTE}\n",
        encoding="utf-8",
    )
    project_md = memsearch_dir / "PROJECT.md"
    project_md.write_text(
        f"# Project\n\nDeploys use {S['aws-access-key']} and {S['stripe-key']}.\n", encoding="utf-8"
    )
    user_md = memsearch_dir / "USER.md"
    user_md.write_text(f"# User\n\nTheir npm token: {S['npm-token']}\n", encoding="utf-8")
    return [journal, note, project_md, user_md]


# --- the test -----------------------------------------------------------------------------------


def _config(home: Path, store: Path, model_url: str) -> None:
    text = f'[milvus]\nuri = "{store}"\n\n'
    # every hit reaches every door (MCP, auto-inject and agent searches keep to the strong-match
    # floor by default): the most text a door could let out
    text += "[search]\nmin_relevance = 0.0\n\n"
    text += (
        f'[llm.providers.fake]\ntype = "anthropic"\nbase_url = "{model_url}"\napi_key = "k"\nmodel = "m"\n'
    )
    text += (
        '\n[plugins.claude-code.project_review]\nenabled = true\nprovider = "fake"\nmin_interval_hours = 0\n'
    )
    for platform in ("claude-code", "codex", "dsh"):
        text += f"\n[plugins.{platform}.prompt_recall]\nauto_inject = true\n"
    (home / ".memsearch" / "config.toml").write_text(text, encoding="utf-8")


def _maintenance_answer(hash_: str) -> Callable[[ModelCall], Answer]:
    """A maintenance model that first reads a section with its memory tool, then writes back
    everything it was given (a parrot: whatever leaked into its input lands in PROJECT.md)."""

    def answer(call: ModelCall) -> Answer:
        if not call.after_tool:
            return Answer(tool="run_memory_command", arguments={"command": f"memsearch expand {hash_}"})
        parrot = call.everything[-20_000:]
        return Answer(
            text=json.dumps({"action": "replace", "reason": "r", "content": f"# Project\n\n{parrot}\n"})
        )

    return answer


async def test_no_door_lets_a_planted_secret_out(isolated_env: Path, model_api: FakeModelAPI) -> None:
    home = Path(os.environ["HOME"])
    project = isolated_env / "billing"
    (project / ".git").mkdir(parents=True)
    transcript = isolated_env / "claude-projects" / f"{SESSION}.jsonl"
    _transcript(transcript)
    planted = _plant(project, transcript)
    store = isolated_env / "store" / "milvus.db"
    _config(home, store, model_api.url)
    memory = project / ".memsearch" / "memory"
    env = {**os.environ, "MEMSEARCH_NO_WATCH": "1"}
    outputs: dict[str, str] = {}

    def run(
        name: str, *args: str, stdin: str = "", extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "memsearch", *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=project,
            env={**env, **(extra or {})},
            timeout=300,
        )
        outputs[name] = outputs.get(name, "") + proc.stdout + proc.stderr
        return proc

    collection = run("collection", "hook", "claude-code", "collection").stdout.strip()
    store_flags = ["--collection", collection]
    # an index built with redaction off (as the original builds one): the store holds the secrets
    indexed = run("index", "index", str(memory), *store_flags, extra={"MEMSEARCH_REDACT": "0"})
    assert indexed.returncode == 0, indexed.stderr
    from memsearch.engine import written

    written.record_transcripts(memory, [str(transcript)])  # as capture records the conversations
    skill = isolated_env / "SKILL-body.md"
    skill.write_text(f"# Release\n\nPush with {S['gitlab-token']}.\n", encoding="utf-8")
    added = run(
        "skills",
        "skills",
        "add",
        "--name",
        "release",
        "--description",
        f"Release with {S['pypi-token']}",
        "--body-file",
        str(skill),
        extra={"MEMSEARCH_REDACT": "0"},
    )
    assert added.returncode == 0, added.stderr

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memsearch", "mcp"], env=env, cwd=project
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()

        async def tool(name: str, args: dict[str, object]) -> str:
            result = await client.call_tool(name, args)
            text = "\n".join(c.text for c in result.content if c.type == "text")
            outputs[f"mcp {name}"] = outputs.get(f"mcp {name}", "") + text
            return text

        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"search", "expand", "transcript", "remember", "stats"}
        hits = await tool("search", {"query": "deploy token password key secret", "top_k": 20})
        hashes = sorted(set(__import__("re").findall(r"chunk_hash ([0-9a-f]{16})", hits)))
        assert len(hashes) >= 3, hits
        for h in hashes:
            await tool("expand", {"chunk_hash": h})
            await tool("expand", {"chunk_hash": h, "section": False})
        await tool("transcript", {"path": str(transcript), "turn": TURN})
        await tool("remember", {"note": "The exits redact what leaves."})
        await tool("stats", {})
        for resource in (await client.list_resources()).resources:
            read_ = await client.read_resource(resource.uri)
            outputs[f"mcp resource {resource.uri}"] = "\n".join(
                getattr(c, "text", "") for c in read_.contents
            )

        # the CLI and a program, on the store the MCP server owns (through its socket)
        def cli() -> None:
            found = run(
                "search",
                "search",
                "deploy token password key secret",
                "-k",
                "20",
                *store_flags,
                "--json-output",
            )
            cli_hashes = [h["chunk_hash"] for h in json.loads(found.stdout)]
            run("search", "search", "vault rotation access keys", "-k", "20", *store_flags)
            for h in cli_hashes:
                run("expand", "expand", h, *store_flags)
                run("expand", "expand", h, "--lines", "3", *store_flags, "--json-output")
                run("expand", "expand", h, "--no-section", *store_flags)
            run("transcript", "transcript", str(transcript))
            run("transcript", "transcript", str(transcript), "--turn", TURN, "--json-output")
            run("recent", "recent", str(memory), "--days", "36500")
            run("recent", "recent", str(memory), "--days", "36500", "--json-output")
            run("forget", "forget", "--query", "deploy token", *store_flags, "--dry-run")
            run("scan", "scan", str(project / ".memsearch"))
            run("stats", "stats", *store_flags)
            run("skills", "skills", "list")
            run("skills", "skills", "list", "--json-output")
            run("error", "search", "anything", "--since", S["github-token"], *store_flags)
            run("recall-log", "search", f"token {S['huggingface-token']}", *store_flags)
            program = (
                "import asyncio, sys\nfrom memsearch import MemSearch\n"
                "async def main():\n"
                f"    with MemSearch([{str(memory)!r}], milvus_uri={str(store)!r},\n"
                f"                   collection={collection!r}) as ms:\n"
                "        for hit in await ms.search('deploy token password key secret', top_k=20):\n"
                "            print(hit['heading'], hit['content'])\n"
                "            print(ms.expand(hit['chunk_hash']).content)\n"
                "asyncio.run(main())\n"
            )
            proc = subprocess.run(
                [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300
            )
            assert proc.returncode == 0, proc.stderr
            outputs["MemSearch"] = proc.stdout + proc.stderr
            from memsearch.agent.hooks.platforms import PLATFORMS

            for platform, row in PLATFORMS.items():
                for event in row.events:
                    if HOST_EVENTS[event] == "driven":
                        run(
                            f"hook {platform} {event}",
                            "hook",
                            platform,
                            event,
                            stdin=_hook_stdin(platform, event, project),
                        )
            run(
                "compact",
                "compact",
                "--llm-provider",
                "fake",
                *store_flags,
                "--output-dir",
                str(isolated_env / "compacted"),
            )
            from console_run import running_console

            with running_console(cwd=project, env={"MEMSEARCH_NO_WATCH": "1"}) as ui:
                pages = ["/", "/api/timeline", "/inbox", "/activity", "/api/activity"]
                for q in ("deploy token password key secret", "vault rotation access keys"):
                    pages += [f"/search?q={q.replace(' ', '+')}", f"/api/search?q={q.replace(' ', '+')}"]
                pages += [f"/expand?chunk={h}" for h in cli_hashes]
                pages += [f"/transcript?path={transcript}&turn={TURN}"]
                for page in pages:
                    answer = ui.get(page)
                    assert answer.status == 200, (page, answer.body[:500])
                    outputs["ui"] = outputs.get("ui", "") + answer.body
            model_api.on(
                lambda call: "project_review" in call.everything or "PROJECT.md" in call.everything,
                _maintenance_answer(cli_hashes[0]),
            )
            maintained = run("maintenance", "maintenance", "run")
            assert maintained.returncode == 0, maintained.stdout + maintained.stderr

        await anyio.to_thread.run_sync(cli)

    requests = "\n".join(json.dumps(c.body) for c in model_api.snapshot())
    outputs["model requests"] = requests
    leaks = {door: sorted(corpus.kinds_in(text)) for door, text in outputs.items() if corpus.kinds_in(text)}
    assert leaks == {}, leaks
    assert len(model_api.snapshot()) >= 3  # compact, and maintenance twice (before and after its tool)
    written_files = [
        p
        for top in (home / ".memsearch", project / ".memsearch", isolated_env / "compacted")
        for p in corpus.hits(top)
        if Path(p.split(": ")[0]) not in (*planted[:2], planted[3]) and "skill-candidates" not in p
    ]
    assert written_files == [], written_files  # PROJECT.md and USER.md too: maintenance rewrote PROJECT.md
    assert "[REDACTED:" in (project / ".memsearch" / "PROJECT.md").read_text(encoding="utf-8")

    # every door redacted something in this run (its count, never a value)
    from memsearch import exits, redact

    counted = {b.removeprefix("exit:") for b in redact.counts() if b.startswith("exit:")}
    assert set(exits.DOORS) - SAFETY_NETS <= counted, set(exits.DOORS) - counted


# --- the doors are the package's: a new one must be driven above ----------------------------------


def test_every_way_in_is_classified() -> None:
    """A new CLI command, host event or memory operation fails here until the test above drives it
    (or says why it shows no memory text)."""
    from memsearch.agent.hooks.platforms import PLATFORMS
    from memsearch.cli import COMMANDS
    from memsearch.engine.operations import OPERATIONS as OPS

    assert set(CLI_COMMANDS) == set(COMMANDS)
    assert {e for row in PLATFORMS.values() for e in row.events} <= set(HOST_EVENTS)
    assert set(OPERATIONS) == set(OPS)
    assert {n for n in CLI_COMMANDS.values()} and all(CLI_COMMANDS.values())


def _door_calls() -> list[tuple[str, str | None]]:
    """(module, door) for every ``exits.out``/``exits.fields`` call in the package (None: not a literal)."""
    calls = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "exits"
                and node.func.attr in ("out", "fields")
            ):
                door = node.args[1] if len(node.args) > 1 else None
                value = door.value if isinstance(door, ast.Constant) and isinstance(door.value, str) else None
                calls.append((str(path.relative_to(SRC)), value))
    return calls


def test_every_door_is_named_and_used() -> None:
    """Each call names a door of the table with a literal; each door of the table has a caller."""
    from memsearch import exits

    calls = _door_calls()
    assert [c for c in calls if c[1] not in exits.DOORS] == []
    assert set(exits.DOORS) == {door for _, door in calls}
