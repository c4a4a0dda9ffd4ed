"""The memory console on a world the real hosts built, in a real browser (Chromium + Playwright).

One world for the module (a real-host run costs a minute or more a host): one HOME and one
project in which Claude Code, Codex, OpenCode, OpenClaw and DeepSeek Harness each capture a turn
through their installed plugins (installed as each host's doc says, the helpers of the host tests),
Claude Code calls the MCP server's ``remember``, and the maintenance tasks draft a skill candidate
and rewrite PROJECT.md through the real ``claude -p``. Only the model is fake (one fake model API
for all of them, each host's answers told apart by its question or its summariser's prompt).

Then, each through the console's pages in Chromium: the timeline shows each host's captured turn;
search → expand → transcript shows Claude Code's real turn; accepting the skill candidate installs
it as ``skills install`` would; forgetting the Codex entry from the page removes it (and search no
longer finds it); the numbers of "What memory did" equal ``memsearch stats --recall --json-output``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import test_host_claude_code as claude
import test_host_codex as codex
import test_host_dsh as dsh
import test_host_mcp as mcp
import test_host_openclaw as openclaw
import test_host_opencode as opencode
from console_run import browser, running_console
from fake_model_api import Answer, FakeModelAPI, ModelCall, running_model_api
from real_hosts import HOSTS, World, host_path, kill_world, make_world, opencode_env, wait_for

pytestmark = pytest.mark.host

SKILL = {
    "skills": [
        {
            "name": "ledger-rollout",
            "description": "Roll out a ledger migration behind a blue-green switch.",
            "body": "# Ledger rollout\n\n1. Switch traffic blue-green.\n2. Keep the old ledger readable.",
            "occurrences": 3,
            "sources": [],
        }
    ]
}
PROJECT = "# Project\n\nThe zebra-ledger migration ships behind a blue-green switch."
REMEMBER = "MCPREMEMBER: keep this for later."
NOTE = "The zebra-ledger cutover happens on Thursday at 06:00 UTC (CONSOLE-MCP)."


def remember_step(call: ModelCall) -> Answer:
    """A model asked to remember: one ``remember`` call, then done."""
    if not [m for m in call.messages if m.tool_result is not None]:
        return Answer(tool=mcp.tool_name(call, "remember"), arguments={"note": NOTE})
    return Answer(text="Remembered.")


def script(api: FakeModelAPI) -> None:
    """Every host's answers on one fake API; the specific summariser marks before Codex's, which
    matches any summary prompt."""
    claude.script_model(api)
    api.on(opencode.is_summary, Answer(text=f"- {opencode.SUMMARY_BULLET}.\n- The turn was recorded."))
    openclaw.script_model(api)
    api.on(
        dsh.is_summary, Answer(text=f"- User asked which queue the invoice exporter uses.\n- {dsh.BULLET}")
    )
    api.on(lambda c: bool(c.tools) and dsh.QUESTION in dsh.typed(c), Answer(text=dsh.ANSWER))
    api.on(lambda c: REMEMBER in c.user_text and bool(c.tools), remember_step)
    api.on(lambda c: "draft skills" in c.user_text, Answer(text=json.dumps(SKILL)))
    answer = {"action": "replace", "reason": "first review", "content": PROJECT}
    api.on(lambda c: "You keep PROJECT.md" in c.user_text, Answer(text=json.dumps(answer)))
    api.on(codex.is_summary, Answer(text="\n".join(codex.SUMMARY)))


def journal_text(world: World) -> str:
    folder = world.project / ".memsearch" / "memory"
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md")))


@dataclass
class Built:
    world: World
    api: FakeModelAPI
    collection: str


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("console-hosts")
    with running_model_api() as api:
        script(api)
        world = make_world(
            root,
            "claude-code",
            ANTHROPIC_BASE_URL=api.url,
            ANTHROPIC_API_KEY=claude.API_KEY,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            FAKE_MODEL_KEY="sk-fake",
            DEEPSEEK_BASE_URL=api.url,
            DEEPSEEK_API_KEY="sk-fake",
            DSH_TELEMETRY_DISABLED="1",
            npm_config_update_notifier="false",
            **opencode_env(root, api.url),
        )
        # every host's folder and the node some of them need before the system's (its node is older)
        paths = list(dict.fromkeys(p for name in HOSTS for p in host_path(name).split(os.pathsep)))
        system = {str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"}
        world.env["PATH"] = os.pathsep.join(
            [p for p in paths if p not in system] + [p for p in paths if p in system]
        )
        try:
            capture_every_host(world, api)
            collection = world.run(
                ["memsearch", "hook", "claude-code", "collection"], check=True
            ).stdout.strip()
            yield Built(world, api, collection)
        finally:
            kill_world(world)


def capture_every_host(world: World, api: FakeModelAPI) -> None:
    # Claude Code: the plugin as its doc installs it, one `claude -p` turn
    claude.install_plugin(world)
    assert world.run(["claude", "-p", claude.QUESTION], timeout=180).returncode == 0
    claude.wait_for_entry(world, claude.BULLETS[0], timeout=120)
    # Codex: its config (the fake provider, the project trusted), the doc's install, `codex exec`
    codex_home = Path(world.env["CODEX_HOME"])
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex.codex_config(api, world.project))
    codex.install(world)
    assert world.run(["codex", "exec", codex.QUESTION], timeout=180).returncode == 0
    wait_for(lambda: codex.SUMMARY[0] in journal_text(world), 120, "Codex's entry")
    # OpenCode: the doc's plugin file, `opencode run` (its daemon journals after it exits)
    opencode.install(world, "plugin-file", "skills")
    question = "Which queue should the invoice exporter use? Codeword ZEBRAFISH"
    assert world.run(["opencode", "run", question], timeout=180).returncode == 0
    wait_for(lambda: opencode.SUMMARY_BULLET in journal_text(world), opencode.DRAIN, "OpenCode's entry")
    # OpenClaw: its config and the doc's install, one `openclaw agent` turn
    openclaw.configure(world, api)
    openclaw.install(world)
    openclaw.agent_turn(world, api, f"oc-{uuid.uuid4().hex[:8]}", openclaw.QUESTION)
    wait_for(lambda: openclaw.BULLET in journal_text(world), 120, "OpenClaw's entry")
    # DeepSeek Harness: the doc's plugin block, one headless session
    world.run(["bash", "-euc", dsh.doc_block("plugin")], check=True, timeout=180)
    dsh.headless(world, api, dsh.QUESTION)
    wait_for(lambda: dsh.BULLET in journal_text(world), dsh.DRAIN, "DeepSeek Harness's entry")
    # the MCP server's `remember`, called by Claude Code (configured by docs/mcp.md)
    (add,) = mcp.doc_block("claude-code").strip().splitlines()
    world.run(shlex.split(add), check=True, timeout=60)
    example = shlex.split(mcp.doc_block("claude-code-print"))
    allowed = example[example.index("--allowedTools") :]
    assert world.run(["claude", *allowed, "-p", REMEMBER], timeout=180).returncode == 0
    wait_for(lambda: NOTE in journal_text(world), 60, "the remembered note")
    # maintenance through the real `claude -p`: a skill candidate and a PROJECT.md rewrite
    distilled = world.run(
        ["memsearch", "skills", "distill", "--platform", "claude-code", "--force"], timeout=300
    )
    assert distilled.returncode == 0, distilled.stdout + distilled.stderr
    reviewed = world.run(
        [
            "memsearch",
            "maintenance",
            "run",
            "--task",
            "project_review",
            "--force",
            "--platform",
            "claude-code",
        ],
        timeout=300,
    )
    assert reviewed.returncode == 0, reviewed.stdout + reviewed.stderr


def console_env(world: World) -> dict[str, str]:
    return {**world.env, "MEMSEARCH_SERVICE_AUTOSTART": "0"}


# --- the tests, in the order a person would look ---------------------------------------------------


def test_the_timeline_shows_each_hosts_captured_turn(built: Built) -> None:
    world = built.world
    wanted = {
        "claude-code": claude.BULLETS[0][2:],
        "codex": codex.SUMMARY[0][2:],
        "opencode": opencode.SUMMARY_BULLET,
        "openclaw": "User asked how webhook retries work.",
        "dsh": "User asked which queue the invoice exporter uses.",
        "mcp": NOTE,
    }
    with running_console(cwd=world.project, env=console_env(world)) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        for host, summary in wanted.items():
            entry = page.locator(f"li.entry[data-host={host}]", has_text=summary[:40])
            assert entry.count() >= 1, f"{host}: {summary}\n{page.locator('main').inner_text()}"
        names = set(page.locator("li.entry[data-host] .host").all_inner_texts())
        assert {"Claude Code", "Codex", "OpenCode", "OpenClaw", "DeepSeek Harness", "MCP remember"} <= names


def test_search_expand_and_the_conversation_in_the_browser(built: Built) -> None:
    world = built.world
    with running_console(cwd=world.project, env=console_env(world)) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        page.goto(f"{ui.base}/search?q=zebra-ledger+rollout+blue-green")
        # The fake model summarises every turn of the session alike, so the later turn (the one that
        # called MCP `remember`) has an entry with the same bullets: equal hits, either may come
        # first (and PROJECT.md says blue-green too). From the hits, expand, then each conversation
        # link: one opens the question's turn.
        hits = page.locator("li.hit", has_text="blue-green")
        expands = [
            hits.nth(i).locator(".actions a", has_text="expand").get_attribute("href")
            for i in range(hits.count())
        ]
        assert expands and all(expands), expands
        opened, expanded = [], []
        for expand in expands:
            page.goto(f"{ui.base}{expand}")
            expanded.append(page.locator("pre.memory").inner_text())
            links = page.locator(".actions a", has_text="conversation")
            for href in [links.nth(i).get_attribute("href") for i in range(links.count())]:
                page.goto(f"{ui.base}{href}")
                selected = page.locator(".turn.selected").inner_text()
                opened.append((selected, page.locator(".conversation").inner_text()))
        assert any(claude.BULLETS[1][2:] in text for text in expanded), expanded  # the entry, expanded
        assert any(claude.QUESTION in selected and claude.ANSWER in whole for selected, whole in opened), (
            opened
        )


def test_accepting_a_skill_candidate_installs_it_as_skills_install_would(built: Built) -> None:
    world = built.world
    candidate = world.project / ".memsearch" / "skill-candidates" / "ledger-rollout" / "SKILL.md"
    assert candidate.is_file()
    with running_console(cwd=world.project, env=console_env(world)) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        page.goto(f"{ui.base}/inbox")
        card = page.locator('[data-skill="ledger-rollout"]')
        card.locator("select[name=platform]").select_option("claude-code")
        card.locator("button", has_text="Accept").click()
        assert "Installed: " in page.locator(".flash").inner_text()
        assert "PROJECT.md" in page.locator("#runs").inner_text()  # the rewrite waits for review
    installed = world.project / ".claude" / "skills" / "ledger-rollout" / "SKILL.md"
    assert installed.read_bytes() == candidate.read_bytes()
    listed = json.loads(world.run(["memsearch", "skills", "list", "-j"], check=True).stdout)
    (row,) = [c for c in listed if c["slug"] == "ledger-rollout"]
    assert row["status"] == "installed" and row["installed_paths"] == [str(installed)]


def test_forget_from_the_page_removes_the_entry(built: Built) -> None:
    world = built.world
    with running_console(cwd=world.project, env=console_env(world)) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        entry = page.locator("li.entry[data-host=codex]", has_text="6543").first
        entry.locator("a.forget").click()
        page.wait_for_url(re.compile(r"/forget\?"))
        assert "Will forget 1 block:" in page.locator("main").inner_text()
        page.locator("button", has_text="Forget 1 block").click()
        assert "Forgot 1 block" in page.locator(".flash").inner_text()
        assert page.locator("li.entry[data-host=codex]", has_text="6543").count() == 0
    assert "6543" not in journal_text(world)
    found = world.run(
        ["memsearch", "search", "staging database port", "-j", "-c", built.collection], check=True
    )
    assert "6543" not in found.stdout


def test_what_memory_did_equals_stats_recall(built: Built) -> None:
    world = built.world
    cli = world.run(["memsearch", "stats", "--recall", "--json-output", "-c", built.collection], check=True)
    theirs = json.loads(cli.stdout)
    assert theirs["totals"]["captures"] >= 5 and theirs["totals"]["injections"] >= 1
    assert any(p["purpose"] == "summary" for p in theirs["llm"])
    with running_console(cwd=world.project, env=console_env(world)) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        page.goto(f"{ui.base}/activity?days=7")
        shown = {key: int(page.locator(f'dd[data-total="{key}"]').inner_text()) for key in theirs["totals"]}
        ours = json.loads(ui.get("/api/activity?days=7").body)
    assert shown == theirs["totals"]
    assert ours == theirs
