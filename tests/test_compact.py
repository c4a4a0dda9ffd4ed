"""Compact and summarize: chunk choice, templating, the locked daily-file write, and both commands
end to end with a real Milvus Lite, the hash embedder and the fake LLM server on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fake_llm_server import FakeLLMServer, fake_llm
from memsearch import MemSearch
from memsearch.cli import cli
from memsearch.compact import (
    CHUNK_SEPARATOR,
    append_section,
    compact_chunks,
    estimate_tokens,
    render_prompt,
    select_chunks,
)
from memsearch.errors import ConfigValueError
from memsearch.llm import UnknownLLMProviderError
from memsearch.prompts import load_prompt

__all__ = ["fake_llm"]  # the fixture, used by name

SUMMARY = "### Watcher\n\n- Moved the file watcher to one worker queue (zebracorn fix)."

# Three dated journal files and one undated notes file; each line is one distinctive chunk body.
FILES = {
    "2026-01-05.md": "# 2026-01-05\n\n## Oldest\n\nAlpha: chose PostgreSQL over MySQL for orders.\n",
    "2026-02-10.md": "# 2026-02-10\n\n## Middle\n\nBravo: the nightly backup now retries three times.\n",
    "sub/2026-03-15.md": "# 2026-03-15\n\n## Newest\n\nCharlie: switched the build from webpack to vite.\n",
}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def ms(tmp_path: Path, notes: Path):
    instance = MemSearch([str(notes)], embedding_provider="hash", milvus_uri=str(tmp_path / "m.db"))
    yield instance
    instance.close()


def today_file(base: Path) -> Path:
    return base / "memory" / f"{dt.date.today().isoformat()}.md"


def llm_args(fake: FakeLLMServer) -> dict[str, str]:
    return {"llm_provider": "openai", "llm_base_url": f"{fake.url}/v1", "llm_api_key": "k"}


# --- choosing the chunks --------------------------------------------------------------------


def test_estimate_tokens_counts_cjk_per_character() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("数据库连接超时") == 7
    assert estimate_tokens("错误 error") == 2 + 2  # two Han characters, then " error" (6 chars)
    assert estimate_tokens("ｶﾀｶﾅ한국어") == 7


def test_select_orders_by_date_path_line_and_keeps_the_newest(tmp_path: Path) -> None:
    undated = tmp_path / "decisions.md"
    undated.write_text("x", encoding="utf-8")
    noon = dt.datetime(2026, 1, 2, 12, 0).timestamp()
    os.utime(undated, (noon, noon))
    chunks = [
        {"source": "/n/2026-01-03.md", "start_line": 9, "content": "E" * 40},
        {"source": "/n/2026-01-03.md", "start_line": 1, "content": "D" * 40},
        {"source": str(undated), "start_line": 1, "content": "C" * 40},
        {"source": "/m/2026-01-01.md", "start_line": 1, "content": "B" * 40},
        {"source": "session:abc", "start_line": 1, "content": "A" * 40},
        {"source": "/n/2026-01-03.md", "start_line": 20, "content": "   "},  # no text: ignored
    ]
    everything = select_chunks(chunks, 10_000)
    assert [t[0] for t in everything.texts] == ["A", "B", "C", "D", "E"]
    assert (everything.total, everything.dropped, everything.used) == (5, 0, 5)

    # Each chunk costs 10 tokens, each separator 2: three chunks need 34 tokens.
    newest = select_chunks(chunks, 34)
    assert [t[0] for t in newest.texts] == ["C", "D", "E"]
    assert (newest.dropped, newest.tokens, newest.truncated) == (2, 34, False)
    assert select_chunks(chunks, 33).texts == ["D" * 40, "E" * 40]


def test_select_cuts_an_oversized_newest_chunk_and_rejects_a_zero_budget() -> None:
    chunks = [{"source": "/a/2026-01-01.md", "start_line": 1, "content": "数据" * 50}]
    selection = select_chunks(chunks, 7)
    assert selection.texts == ["数据数据数据数"] and selection.truncated and selection.used == 1
    with pytest.raises(ConfigValueError, match="at least 1"):
        select_chunks(chunks, 0)


def test_only_the_literal_placeholder_is_replaced() -> None:
    template = 'Reply as {"json": true}; keep {{this}} and {other} and {chunks!r}:\n{chunks}'
    assert render_prompt(template, "TEXT") == (
        'Reply as {"json": true}; keep {{this}} and {other} and {chunks!r}:\nTEXT'
    )
    with pytest.raises(ConfigValueError) as info:
        render_prompt("no placeholder {chunk}", "TEXT")
    assert info.value.one_line() == (
        "prompt_template must include the {chunks} placeholder. "
        "Hint: Put {chunks} where the chunk text should go; other braces are sent as written."
    )


async def test_compact_chunks_keeps_the_reference_signature(fake_llm: FakeLLMServer) -> None:
    chunks = [
        {"source": "/a/2026-01-02.md", "start_line": 1, "content": "second"},
        {"source": "/a/2026-01-01.md", "start_line": 1, "content": "first"},
    ]
    assert await compact_chunks([], base_url=f"{fake_llm.url}/v1") == ""
    text = await compact_chunks(chunks, prompt_template="<{chunks}>", base_url=f"{fake_llm.url}/v1")
    assert text == fake_llm.default_reply
    assert fake_llm.prompts == [f"<first{CHUNK_SEPARATOR}second>"]


# --- the daily file -------------------------------------------------------------------------


def test_append_section_titles_only_a_new_file(tmp_path: Path) -> None:
    day = dt.date(2026, 3, 1)
    path = tmp_path / "memory" / "2026-03-01.md"
    append_section(path, "- first\n\n", day)
    assert path.read_text(encoding="utf-8") == "# 2026-03-01\n\n## Memory Compact\n\n- first\n"
    append_section(path, "- second", day)
    assert path.read_text(encoding="utf-8") == (
        "# 2026-03-01\n\n## Memory Compact\n\n- first\n\n## Memory Compact\n\n- second\n"
    )
    other = tmp_path / "no-newline.md"
    other.write_text("## Session 10:00\n- note", encoding="utf-8")
    append_section(other, "- s", day)
    assert other.read_text(encoding="utf-8") == "## Session 10:00\n- note\n\n## Memory Compact\n\n- s\n"


def test_append_section_waits_for_the_file_lock(tmp_path: Path) -> None:
    path = tmp_path / "day.md"
    path.write_text("# 2026-03-01\n", encoding="utf-8")
    with open(path, "rb") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        writer = threading.Thread(target=append_section, args=(path, "- waited", dt.date(2026, 3, 1)))
        writer.start()
        time.sleep(0.3)
        assert writer.is_alive()
        assert path.read_text(encoding="utf-8") == "# 2026-03-01\n"
        fcntl.flock(holder.fileno(), fcntl.LOCK_UN)
    writer.join(5)
    assert path.read_text(encoding="utf-8") == "# 2026-03-01\n\n## Memory Compact\n\n- waited\n"


_WRITER = """
import datetime as dt, sys, time
from memsearch.compact import append_section
path, letter, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
while time.time() < start:
    pass
for _ in range(10):
    append_section(path, letter * 100_000, dt.date(2026, 3, 1))
"""


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    """Separate processes (a compact, agent hooks) appending to one new daily file at the same moment."""
    path = tmp_path / "memory" / "2026-03-01.md"
    letters = "abcdef"
    start = time.time() + 1.0  # all writers begin together, after their start-up
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), letter, str(start)]) for letter in letters
    ]
    assert [p.wait(60) for p in procs] == [0] * len(letters)
    head, *sections = path.read_text(encoding="utf-8").split("\n\n## Memory Compact\n\n")
    assert head == "# 2026-03-01"
    assert sorted(s.strip() for s in sections) == sorted(c * 100_000 for c in letters for _ in range(10))


# --- MemSearch.compact, end to end ----------------------------------------------------------


async def test_compact_appends_one_section_and_indexes_it(
    ms: MemSearch, notes: Path, fake_llm: FakeLLMServer
) -> None:
    await ms.index()
    fake_llm.reply(SUMMARY)
    summary = await ms.compact(**llm_args(fake_llm))
    assert summary == SUMMARY
    # The default place is under the first indexed path.
    daily = today_file(notes)
    assert (
        daily.read_text(encoding="utf-8")
        == f"# {dt.date.today().isoformat()}\n\n## Memory Compact\n\n{SUMMARY}\n"
    )
    # Chunks went to the LLM oldest first, inside the built-in template.
    (prompt,) = fake_llm.prompts
    template = load_prompt("compact")
    before, after = template.split("{chunks}")
    assert prompt.startswith(before) and prompt.endswith(after)
    body = prompt[len(before) : len(prompt) - len(after)]
    assert [part.split("\n")[-1][0] for part in body.split(CHUNK_SEPARATOR)] == ["A", "B", "C"]
    # Searchable at once.
    hits = await ms.search("zebracorn watcher worker queue", top_k=1)
    assert hits[0]["source"] == str(daily.resolve()) and "zebracorn" in hits[0]["content"]


async def test_compact_template_with_braces_and_output_dir(
    ms: MemSearch, tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    await ms.index()
    out = tmp_path / "out"
    await ms.compact(
        prompt_template='Answer as {"json": true} about:\n{chunks}', output_dir=out, **llm_args(fake_llm)
    )
    assert fake_llm.prompts[0].startswith('Answer as {"json": true} about:\n')
    assert "Alpha: chose PostgreSQL" in fake_llm.prompts[0]
    assert today_file(out).is_file()
    with pytest.raises(ConfigValueError, match="placeholder"):
        await ms.compact(prompt_template="no slot", **llm_args(fake_llm))
    with pytest.raises(UnknownLLMProviderError):
        await ms.compact(llm_provider="cohere")
    assert len(fake_llm.requests) == 1


async def test_token_budget_keeps_the_newest(ms: MemSearch, notes: Path, fake_llm: FakeLLMServer) -> None:
    await ms.index()
    await ms.compact(token_budget=30, **llm_args(fake_llm))
    (prompt,) = fake_llm.prompts
    assert "Charlie: switched the build" in prompt
    assert "Bravo" not in prompt and "Alpha" not in prompt


async def test_empty_answer_writes_nothing(ms: MemSearch, notes: Path, fake_llm: FakeLLMServer) -> None:
    await ms.index()
    fake_llm.reply("  \n\t ")
    assert await ms.compact(**llm_args(fake_llm)) == ""
    assert len(fake_llm.requests) == 1
    assert not (notes / "memory").exists()


async def test_source_filter_file_folder_and_no_match(
    ms: MemSearch, notes: Path, fake_llm: FakeLLMServer
) -> None:
    await ms.index()
    await ms.compact(source=str(notes / "2026-02-10.md"), **llm_args(fake_llm))
    assert "Bravo" in fake_llm.prompts[-1] and "Alpha" not in fake_llm.prompts[-1]
    assert "Charlie" not in fake_llm.prompts[-1]
    await ms.compact(source=str(notes / "sub"), **llm_args(fake_llm))
    assert "Charlie" in fake_llm.prompts[-1] and "Bravo" not in fake_llm.prompts[-1]
    assert await ms.compact(source=str(notes / "nothing.md"), **llm_args(fake_llm)) == ""
    assert len(fake_llm.requests) == 2


# --- memsearch compact ----------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path):
    runner = CliRunner()
    uri = str(tmp_path / "cli.db")

    def invoke(*args: str, input: str | bytes | None = None, store: bool = True):
        extra = ["--milvus-uri", uri, "--provider", "hash"] if store else []
        return runner.invoke(cli, [*args, *extra], input=input, catch_exceptions=False)

    return invoke


def cli_llm(fake: FakeLLMServer) -> list[str]:
    return ["--llm-provider", "openai", "--llm-base-url", f"{fake.url}/v1", "--llm-api-key", "k"]


def write_global(text: str) -> None:
    path = Path.home() / ".memsearch" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_cli_compact_output_and_messages(run, notes: Path, fake_llm: FakeLLMServer) -> None:
    assert run("compact", *cli_llm(fake_llm)).stdout == "No chunks to compact.\n"
    assert run("index", str(notes)).exit_code == 0
    fake_llm.reply(SUMMARY)
    r = run("compact", *cli_llm(fake_llm))
    assert r.exit_code == 0, r.output
    daily = today_file(Path.cwd())
    assert r.stdout == (
        f"Compact complete. Summary:\n\n{SUMMARY}\n\nAppended to {daily} (3 of 3 chunks summarised).\n"
    )
    assert daily.read_text(encoding="utf-8").count("## Memory Compact") == 1

    r = run("compact", "--source", "nowhere/else.md", *cli_llm(fake_llm))
    assert r.stdout == "No chunks matched source: nowhere/else.md\n"
    r = run("compact", "-s", str(notes / "gone.md"), *cli_llm(fake_llm))
    assert r.stdout == f"No chunks matched source: {notes / 'gone.md'}\n"


def test_cli_compact_budget_source_and_empty_answer(run, notes: Path, fake_llm: FakeLLMServer) -> None:
    assert run("index", str(notes)).exit_code == 0
    out = Path.cwd() / "elsewhere"
    r = run("compact", "--token-budget", "30", "-o", str(out), *cli_llm(fake_llm))
    assert r.stdout.endswith(
        f"Appended to {today_file(out)} (1 of 3 chunks summarised).\n"
        "Left out the 2 oldest chunks: they did not fit the 30-token budget (--token-budget).\n"
    )
    before = today_file(out).read_text(encoding="utf-8")
    fake_llm.reply("")
    r = run("compact", "--source", str(notes / "2026-01-05.md"), "-o", str(out), *cli_llm(fake_llm))
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == (
        "Error: The LLM returned an empty summary of 1 chunk; nothing was written. "
        "Hint: Try again, or another model or prompt.\n"
    )
    assert "Alpha" in fake_llm.prompts[-1] and "Charlie" not in fake_llm.prompts[-1]
    assert today_file(out).read_text(encoding="utf-8") == before


def test_cli_compact_flags_beat_config_files(
    run, notes: Path, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    from_config = tmp_path / "config-prompt.txt"
    from_config.write_text("CONFIG {chunks}", encoding="utf-8")
    from_flag = tmp_path / "flag-prompt.txt"
    from_flag.write_text("FLAG {chunks}", encoding="utf-8")
    write_global(
        f'[llm]\nprovider = "anthropic"\nbase_url = "http://127.0.0.1:9/never"\napi_key = "file-key"\n'
        f'[prompts]\ncompact = "{from_config}"\n'
    )
    assert run("index", str(notes)).exit_code == 0
    assert run("compact", *cli_llm(fake_llm)).exit_code == 0
    assert fake_llm.prompts[-1].startswith("CONFIG ")
    assert fake_llm.requests[-1].headers["authorization"] == "Bearer k"
    assert run("compact", "--prompt-file", str(from_flag), *cli_llm(fake_llm)).exit_code == 0
    assert fake_llm.prompts[-1].startswith("FLAG ")
    assert (
        run(
            "compact", "--prompt", "TEXT {chunks}", "--prompt-file", str(from_flag), *cli_llm(fake_llm)
        ).exit_code
        == 0
    )
    assert fake_llm.prompts[-1].startswith("TEXT ")


def test_cli_compact_errors_before_any_request(run, tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    r = run("compact", "--prompt", "no slot", *cli_llm(fake_llm))
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: prompt_template must include the {chunks} placeholder. Hint: ")
    r = run("compact", "--llm-provider", "cohere")
    assert r.exit_code == 1
    assert r.stderr.startswith(
        "Error: Unknown LLM provider type 'cohere'. Available: openai, openai-compatible"
    )
    r = run("compact", "--token-budget", "0")
    assert r.exit_code == 2 and "--token-budget" in r.stderr
    r = run("compact", "--llm-provider", "gemini")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: No API key for the Gemini LLM provider. Hint: Set GOOGLE_API_KEY")
    assert fake_llm.requests == []
    assert not (tmp_path / "cli.db").exists()  # every check ran before the store was opened


# --- memsearch summarize --------------------------------------------------------------------

TURN = "[User] why does checkout time out?\n[Codex] raised pool_size in shop/db.py; load test passes.\n"


@pytest.fixture
def summarize_config(fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    monkeypatch.setenv("FAST_KEY", "fast-secret")
    write_global(
        '[plugins.codex.summarize]\nprovider = "fast"\n'
        '[plugins.opencode.summarize]\nprovider = "ghost"\n'
        '[plugins.openclaw.summarize]\nprovider = "fast"\nmodel = "plugin-model"\n'
        '[plugins.dsh.summarize]\nprovider = "native"\n'
        f'[llm.providers.fast]\ntype = "openai-compatible"\nmodel = "provider-model"\n'
        f'base_url = "{fake_llm.url}/v1"\napi_key = "env:FAST_KEY"\n'
    )
    return fake_llm


def test_summarize_happy_path(run, summarize_config: FakeLLMServer) -> None:
    fake = summarize_config
    fake.reply("- User asked why checkout timed out.\n- Codex raised the pool size.\n\n")
    r = run("summarize", "--plugin", "codex", "--agent-name", "Codex", input=TURN, store=False)
    assert r.exit_code == 0, r.output
    assert r.stdout == "- User asked why checkout timed out.\n- Codex raised the pool size.\n"
    assert r.stderr == ""
    (req,) = fake.requests
    assert req.prompt == load_prompt("summarize", agent_name="Codex") + "\n\nTranscript:\n" + TURN
    assert "between User and Codex" in req.prompt and "pool_size in shop/db.py" in req.prompt
    assert req.body["model"] == "provider-model"
    assert req.headers["authorization"] == "Bearer fast-secret"


def test_summarize_plugin_model_default_agent_name_and_prompt_file(
    run, summarize_config: FakeLLMServer, tmp_path: Path
) -> None:
    fake = summarize_config
    assert run("summarize", "--plugin", "openclaw", input=b"caf\xe9 turn", store=False).exit_code == 0
    assert fake.requests[-1].body["model"] == "plugin-model"
    assert "between User and openclaw" in fake.requests[-1].prompt
    assert fake.requests[-1].prompt.endswith("Transcript:\ncaf\ufffd turn")

    custom = tmp_path / "summarize.txt"
    custom.write_text("Summarise for {{AGENT_NAME}}.", encoding="utf-8")
    path = Path.home() / ".memsearch" / "config.toml"
    path.write_text(
        path.read_text(encoding="utf-8") + f'[prompts]\nsummarize = "{custom}"\n', encoding="utf-8"
    )
    assert (
        run("summarize", "--plugin", "codex", "--agent-name", "Codex", input="t", store=False).exit_code == 0
    )
    assert fake.requests[-1].prompt == "Summarise for Codex.\n\nTranscript:\nt"


def test_summarize_native_unknown_and_empty(run, summarize_config: FakeLLMServer) -> None:
    fake = summarize_config
    for plugin in ("claude-code", "dsh"):  # provider unset, or "native"
        r = run("summarize", "--plugin", plugin, input=TURN, store=False)
        assert r.exit_code == 2
        assert r.stdout == ""
        assert r.stderr == (
            f"Plugin '{plugin}' is configured for native summarization; "
            "no memsearch-managed provider selected.\n"
        )
    r = run("summarize", "--plugin", "opencode", input=TURN, store=False)
    assert r.exit_code == 1
    assert r.stderr == (
        "Error: Unknown LLM provider 'ghost'. Configure [llm.providers.ghost]. "
        "Hint: Add [llm.providers.ghost] with type, model, base_url and api_key to "
        "~/.memsearch/config.toml (configured providers: fast).\n"
    )
    r = run("summarize", "--plugin", "vim", input=TURN, store=False)
    assert r.exit_code == 1
    assert r.stderr == (
        "Error: Unknown plugin platform: vim. "
        "Hint: Valid platforms: claude-code, codex, opencode, openclaw, dsh\n"
    )
    r = run("summarize", "--plugin", "codex", input=" \n\t", store=False)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "")
    assert fake.requests == []
    fake.reply("   ")
    r = run("summarize", "--plugin", "codex", input=TURN, store=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: The LLM returned an empty summary.")


def test_summarize_unset_key_variable(
    run, summarize_config: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FAST_KEY")
    r = run("summarize", "--plugin", "codex", input=TURN, store=False)
    assert r.exit_code == 1
    assert r.stderr.startswith(
        "Error: Environment variable 'FAST_KEY' referenced in config (via 'env:FAST_KEY') is not set"
    )
    assert summarize_config.requests == []
