"""The memory console in a real browser: Chromium from the Debian archive, driven by Playwright.

The world is a project whose journals are written in the hooks' exact format (every host, the MCP
``remember`` tool, a hand-written entry and note: ``console_run.journal_world``); the console is a
real ``memsearch ui`` process. What only a browser shows: the pages render and are usable by
keyboard, a journal holding script renders inert (no dialog, no script run, its text shown), a
form on another site cannot change anything even though the browser sends the console's cookie
(same site, another port), the page follows what other processes write without a reload, the
charts are drawn from the report, it reads in dark mode and without JavaScript.

The README's two screenshots come from here: run with ``UI_SCREENSHOTS=docs`` to write
``docs/ui-timeline.png`` and ``docs/ui-inbox.png`` (otherwise they go to the test's temp folder).
"""

from __future__ import annotations

import datetime as dt
import http.server
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from cli_process import memsearch
from console_run import CLAUDE_SESSION, HOST_TURNS, World, browser, journal_world, running_console, wait_until

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def world(isolated_env: Path) -> Iterator[World]:
    yield journal_world(isolated_env)


def test_the_timeline_reads_and_navigates_by_keyboard(world: World, tmp_path: Path) -> None:
    with running_console(cwd=world.project) as ui, browser() as ctx:
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(ui.login_url)
        assert page.url == f"{ui.base}/"  # the token left the address bar
        entries = page.locator("li.entry[data-host]")
        assert entries.count() == len(HOST_TURNS)
        hosts = [entries.nth(i).get_attribute("data-host") for i in range(entries.count())]
        assert hosts == [h for h, _, _ in HOST_TURNS]
        assert page.locator("li.entry[data-host=opencode] .host").inner_text() == "OpenCode"
        page.keyboard.press("j")
        page.keyboard.press("j")
        assert "HERON-22" in page.evaluate("document.activeElement.textContent")
        page.keyboard.press("o")
        page.wait_for_url(re.compile(r"/expand\?"))
        assert "Codex moved the staging database to port 6543" in page.locator("pre.memory").inner_text()
        page.keyboard.press("/")
        page.wait_for_url(re.compile(r"/search\?"))
        page.fill("#q", "watcher atomic saves")
        page.keyboard.press("Enter")
        page.wait_for_selector("li.hit")
        page.locator("li.hit .actions a", has_text="expand").first.click()
        page.locator("a", has_text="conversation").click()
        selected = page.locator(".turn.selected")
        assert "The watcher test fails about one run in five" in selected.inner_text()
        assert errors == []


def test_screenshots_of_the_timeline_and_the_inbox(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's pictures, taken of the real pages (``UI_SCREENSHOTS=docs`` writes them there):
    the timeline of every host, and an inbox with a skill candidate, a maintenance rewrite, a
    secret found by scan and a duplicated entry."""
    import json

    from fixtures.privacy import corpus
    from memsearch import maintenance
    from memsearch.agent.hooks.base import HookContext, HookInput
    from memsearch.agent.hooks.engine import get_platform
    from memsearch.engine.journal import JournalEntry, append_entry

    body = tmp_path / "body.md"
    body.write_text("1. Run the tests.\n2. Tag the release.\n3. Push the tag.\n")
    added = memsearch(
        "skills", "add", "--name", "release-steps", "--description", "Cut a release: test, tag, push.",
        "--body-file", str(body), cwd=world.project,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    monkeypatch.chdir(world.project)
    (world.memsearch_dir / "PROJECT.md").write_text("# notes-app\n\nA notes app with a file watcher.\n")
    ctx = HookContext.build(get_platform("claude-code"), "maintenance", HookInput(cwd=str(world.project)))
    content = (
        "# notes-app\n\nA notes app with a file watcher.\n\n- Atomic saves are renames: watch moves too.\n"
    )
    answer = json.dumps({"action": "replace", "content": content, "reason": "the watcher fix"})
    maintenance.run_tasks(ctx, only=["project_review"], force=True, explicit=True, ask=lambda r, p: answer)
    later = dt.datetime.combine(dt.date.today(), dt.time(17, 30))
    append_entry(
        world.memory, JournalEntry(["Codex moved the staging database to port 6543 (HERON-22)."]), when=later
    )
    with sorted(world.memory.glob("2*.md"))[0].open("a") as fh:
        fh.write(f"### 18:00\n- Deployed with {corpus.SECRETS['npm-token']} by mistake.\n\n")
    folder = Path(os.environ.get("UI_SCREENSHOTS") or tmp_path)
    if not folder.is_absolute():
        folder = REPO / folder
    with running_console(cwd=world.project) as ui, browser() as ctx_:
        page = ctx_.new_page()
        page.goto(ui.login_url)
        page.screenshot(path=str(folder / "ui-timeline.png"))
        page.goto(f"{ui.base}/inbox")
        page.screenshot(path=str(folder / "ui-inbox.png"), full_page=True)
    for name in ("ui-timeline.png", "ui-inbox.png"):
        data = (folder / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 5_000 < len(data) < 400_000


def test_a_journal_holding_script_renders_inert(world: World) -> None:
    journal = sorted(world.memory.glob("2*.md"))[0]
    with journal.open("a") as fh:
        fh.write(
            "### 23:00\n<!-- session:evil turn:e1 transcript:/nowhere.jsonl -->\n"
            '- <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> (WREN-88)\n\n'
        )
    with running_console(cwd=world.project) as ui, browser() as ctx:
        page = ctx.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(ui.login_url)
        text = page.locator("li.entry", has_text="WREN-88").inner_text()
        assert "<script>window.__pwned = 1</script>" in text and "<img src=x onerror=" in text
        page.locator("li.entry", has_text="WREN-88").locator("a").first.click()
        page.wait_for_url(re.compile(r"/expand\?"))
        assert "<script>window.__pwned" in page.locator("pre.memory").inner_text()
        assert page.evaluate("window.__pwned") is None and dialogs == []
        assert page.locator("main script, main img").count() == 0
        assert not [u for u in requests if u.endswith("/x")]  # the <img> was never an image


class _Evil(http.server.BaseHTTPRequestHandler):
    """A page on another port of 127.0.0.1 (the same site, so the browser sends the console's
    SameSite cookie) whose form posts a forget to the console."""

    target = ""
    fields: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in self.fields.items())
        body = (
            f'<html><body><form id="f" method="post" action="{self.target}">{inputs}</form>'
            '<script>document.getElementById("f").submit()</script></body></html>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


def test_a_form_on_another_site_cannot_forget(world: World) -> None:
    journal = sorted(world.memory.glob("2*.md"))[0]
    before = journal.read_bytes()
    line = next(i for i, t in enumerate(before.decode().splitlines(), 1) if t.startswith("### "))
    with running_console(cwd=world.project) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)  # logged in: the cookie is set
        _Evil.target = f"{ui.base}/act/forget"
        _Evil.fields = {"journal": journal.name, "line": str(line), "block": CLAUDE_SESSION}
        evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            answered: list[int] = []
            page.on("response", lambda r: answered.append(r.status) if "/act/" in r.url else None)
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
            wait_until(lambda: answered, 15, "the console's answer to the forged form")
            assert answered == [403]
        finally:
            evil.shutdown()
            evil.server_close()
    assert journal.read_bytes() == before


def test_the_page_follows_what_other_processes_write(world: World) -> None:
    from memsearch.engine.journal import JournalEntry, append_entry

    with running_console(cwd=world.project) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url)
        page.wait_for_selector(".live")
        append_entry(
            world.memory, JournalEntry(["A turn written meanwhile (LOON-42)."]), when=dt.datetime.now()
        )
        page.locator("li.entry", has_text="LOON-42").wait_for(timeout=20_000)  # no reload
        assert page.locator(".live").inner_text().startswith("updated")


def test_what_memory_did_is_drawn_from_the_report(world: World) -> None:
    from memsearch.agent import recall_log
    from memsearch.agent.hooks.collection import derive_collection
    from memsearch.config import resolve_config

    collection = derive_collection(world.project)
    cfg = resolve_config()
    recall_log.record(cfg, collection, "inject", session="s-1", host="codex", tokens=300)
    recall_log.record(cfg, collection, "search", session="s-1", host="codex", query="port", hits=2)
    with running_console(cwd=world.project) as ui, browser() as ctx:
        page = ctx.new_page()
        page.goto(ui.login_url.replace("/?", "/activity?days=7&"))
        figure = page.locator('figure[data-chart="injected_tokens"]')
        figure.locator("svg").wait_for()
        assert figure.locator("svg rect").count() == 7  # one bar a day
        titles = figure.locator("svg rect title").evaluate_all("found => found.map(t => t.textContent)")
        assert f"{dt.date.today().isoformat()} injected tokens: 300" in titles
        assert page.locator('dd[data-total="injected_tokens"]').inner_text() == "300"


def test_dark_mode_and_no_javascript(world: World) -> None:
    with running_console(cwd=world.project) as ui:
        with browser(color_scheme="dark") as ctx:
            page = ctx.new_page()
            page.goto(ui.login_url)
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            red, green, blue = (int(x) for x in re.findall(r"\d+", background)[:3])
            assert red + green + blue < 150, background
        with browser(java_script_enabled=False) as ctx:
            page = ctx.new_page()
            page.goto(ui.login_url)
            assert page.locator("li.entry[data-host]").count() == len(HOST_TURNS)
            assert page.locator(".live").count() == 0  # the script did not run: still readable
            page.goto(f"{ui.base}/search?q=fast+queue+invoice+exporter")
            assert "OSPREY-33" in page.locator("li.hit").first.inner_text()
            page.locator("li.hit .actions a", has_text="expand").first.click()
            assert "OpenCode picked the fast queue" in page.locator("pre.memory").inner_text()
