"""``memsearch ui`` over real HTTP: who may ask, what leaves, and every page and action.

Real parts: the console is a ``python -m memsearch ui`` process (``console_run.running_console``),
its store is Milvus Lite reached through the store's owner, the journals are written the way each
host's capture writes them (``console_run.journal_world``), the CLI is run as a process. The
browser tests are in test_console_browser.py, the world of real hosts in test_console_hosts.py.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from cli_process import memsearch
from console_run import (
    CLAUDE_QUESTION,
    CLAUDE_SESSION,
    CLAUDE_TURN,
    HOST_TURNS,
    journal_world,
    running_console,
)
from fixtures.privacy import corpus
from memsearch.agent.hooks.collection import derive_collection

HOST_NAMES = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "opencode": "OpenCode",
    "openclaw": "OpenClaw",
    "dsh": "DeepSeek Harness",
    "mcp": "MCP remember",
    "hand": "hand-written entry",
}


def entry_line(world_memory: Path, needle: str) -> tuple[Path, int]:
    """The journal and the line of the ``### HH:MM`` heading of the entry holding ``needle``."""
    for path in sorted(world_memory.glob("*.md")):
        heading = 0
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("### "):
                heading = number
            if needle in line:
                return path, heading
    raise AssertionError(f"no entry holds {needle!r}")


# --- who may ask --------------------------------------------------------------------------------------


def test_no_token_no_answer_and_the_printed_address_logs_in(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    with running_console(cwd=world.project) as ui:
        for path in ("/", "/search?q=x", "/inbox", "/activity", "/api/timeline", "/static/console.js"):
            answer = ui.get(path, auth=False)
            assert answer.status == 401, path
            assert "KESTREL" not in answer.body and answer.body.startswith("Error: ")
        wrong = ui.get("/", auth=False, headers={"Authorization": "Bearer " + "x" * 43})
        assert wrong.status == 401
        login = ui.get(f"/?token={ui.token}", auth=False)
        assert login.status == 303 and login.headers["location"] == "/"  # the token leaves the URL
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = ui.get("/", auth=False, headers={"Cookie": cookie.split(";")[0]})
        assert page.status == 200 and "KESTREL-11" in page.body
        assert ui.get("/", auth=False, headers={"Cookie": f"memsearch-ui-{ui.port}=nope"}).status == 401
        for header in ("content-security-policy", "x-frame-options", "x-content-type-options"):
            assert header in page.headers
        assert "script-src 'self'" in page.headers["content-security-policy"]
    token_file = Path.home() / ".memsearch" / "ui-token"
    assert token_file.read_text().strip() == ui.token and token_file.stat().st_mode & 0o777 == 0o600


def test_a_foreign_host_or_origin_is_refused(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    with running_console(cwd=world.project) as ui:
        rebound = ui.get("/", headers={"Host": f"attacker.example:{ui.port}"})  # DNS rebinding
        assert rebound.status == 403 and "KESTREL" not in rebound.body
        assert ui.get("/", headers={"Host": "127.0.0.1:1"}).status == 403
        assert ui.get("/", headers={"Host": f"localhost:{ui.port}"}).status == 200
        foreign = {"Origin": "http://attacker.example"}
        assert ui.get("/api/timeline", headers=foreign).status == 403
        assert ui.get("/", headers={"Referer": "http://attacker.example/page"}).status == 403
        path, line = entry_line(world.memory, "HERON-22")
        form = {"csrf": ui.csrf(), "journal": path.name, "line": line, "block": "x"}
        refused = ui.post("/act/forget", form, headers=foreign)
        assert refused.status == 403
    assert "HERON-22" in path.read_text()


def test_a_post_without_the_csrf_token_changes_nothing(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    path, line = entry_line(world.memory, "HERON-22")
    before = path.read_bytes()
    with running_console(cwd=world.project) as ui:
        confirm = ui.get(f"/forget?journal={path.name}&line={line}")
        blocks = re.findall(r'name="block" value="([^"]+)"', confirm.body)
        assert confirm.status == 200 and len(blocks) == 1
        form = {"journal": path.name, "line": line, "block": blocks}
        assert ui.post("/act/forget", form).status == 403  # no token in the form
        assert ui.post("/act/forget", {**form, "csrf": "forged"}).status == 403
        assert ui.get(f"/act/forget?journal={path.name}&line={line}").status == 405  # GET changes nothing
    assert path.read_bytes() == before


# --- what leaves ----------------------------------------------------------------------------------------


def test_memory_text_is_escaped_and_private_text_and_keys_never_leave(isolated_env: Path) -> None:
    from memsearch.engine.journal import JournalEntry, append_entry

    world = journal_world(isolated_env)
    key = corpus.SECRETS["github-token"]
    # written as the original (no redaction) or a person would: straight into the files
    with (world.memory / sorted(p.name for p in world.memory.glob("2*.md"))[0]).open("a") as journal:
        journal.write(
            "### 23:00\n<!-- session:evil turn:e1 transcript:/nowhere.jsonl -->\n"
            "- Ran <script>window.__pwned=1</script> and <img src=x onerror=alert(2)> (WREN-88).\n"
            f"- Pushed with {key} to the deploy branch (WREN-88).\n\n"
        )
    (world.memory / "private-note.md").write_text(
        "# Private\n\nThe door code is <private>4711-SECRET-DOOR</private> and WREN-99 is public.\n"
    )
    append_entry(world.memory, JournalEntry(["A normal entry (WREN-77)."]))
    with running_console(cwd=world.project) as ui:
        timeline = ui.get("/").body
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in timeline
        assert "<script>window" not in timeline and "<img src=x" not in timeline
        hit = json.loads(ui.get("/api/search?q=WREN-88+deploy+branch").body)["hits"][0]
        pages = {
            "timeline": timeline,
            "timeline api": ui.get("/api/timeline").body,
            "search": ui.get("/search?q=WREN-88+pushed+deploy").body,
            "search api": json.dumps(hit),
            "search note": ui.get("/search?q=door+code+WREN-99").body,
            "expand": ui.get(f"/expand?chunk={hit['chunk_hash']}").body,
            "inbox": ui.get("/inbox").body,
            "activity": ui.get("/activity").body,
            "forget": ui.get(f"/forget?chunk={hit['chunk_hash']}").body,
        }
        assert "WREN-99" in pages["search note"]  # the note was found: its private span is gone
        assert "<script>window" not in pages["expand"]
        for name, page in pages.items():
            assert key not in page, name
            assert "4711-SECRET-DOOR" not in page, name
        assert "[REDACTED:github-token]" in pages["expand"]
        assert "github-token" in pages["inbox"]  # scan's finding: where and which kind, never the value


# --- the timeline ---------------------------------------------------------------------------------------


def test_the_timeline_names_each_host_with_its_session_and_time(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    with running_console(cwd=world.project) as ui:
        page = ui.get("/").body
        for host, anchor, bullets in HOST_TURNS:
            entry = re.search(rf'<li class="entry" data-host="{host}">(.*?)</li>', page, re.S)
            assert entry, host
            assert HOST_NAMES[host] in entry.group(1) and bullets[0].split("(")[0].strip() in entry.group(1)
            if anchor.get("session"):
                assert f"session {anchor['session'][:12]}" in entry.group(1)
        assert re.search(r'<time class="time">09:00</time> <span class="host host-claude-code">', page)
        assert "Decisions" in page and "host-note" in page  # the hand-written note of the day
        only = ui.get("/?host=codex").body
        assert "HERON-22" in only and "KESTREL-11" not in only and "Decisions" not in only
        days = json.loads(ui.get("/api/timeline").body)["days"]
        hosts = [e["host"] for e in days[0]["entries"]]
        assert hosts == [h for h, _, _ in HOST_TURNS]
        assert ui.get("/?host=nobody").status == 400


def test_the_timeline_pages_by_day(isolated_env: Path) -> None:
    import datetime as dt

    from memsearch.engine.journal import JournalEntry, append_entry

    world = journal_world(isolated_env)
    today = dt.date.today()
    for back in range(1, 12):
        when = dt.datetime.combine(today - dt.timedelta(days=back), dt.time(8, 0))
        append_entry(world.memory, JournalEntry([f"Day {back} work (DAY-{back:02d})."]), when=when)
    with running_console(cwd=world.project) as ui:
        first = ui.get("/").body
        assert "DAY-06" in first and "DAY-07" not in first  # 7 days: today and 6 back
        older = re.search(r'href="(/\?[^"]*before=[^"]+)">Older days', first)
        assert older
        second = ui.get(older.group(1).replace("&amp;", "&")).body
        assert "DAY-07" in second and "DAY-11" in second and "DAY-06" not in second
        assert "Older days" not in second
        day = (today - dt.timedelta(days=3)).isoformat()
        assert "DAY-03" in ui.get(f"/?day={day}").body and "DAY-04" not in ui.get(f"/?day={day}").body


# --- search, expand, transcript ---------------------------------------------------------------------------


def test_search_expand_and_the_conversation_behind_it(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    with running_console(cwd=world.project) as ui:
        ours = json.loads(ui.get("/api/search?q=watcher+flaky+atomic+saves&k=3").body)["hits"]
        collection = ("--collection", derive_collection(world.project))
        cli = memsearch(
            "search", "watcher flaky atomic saves", "-k", "3", "-j", *collection, cwd=world.project
        )
        assert cli.returncode == 0, cli.stderr
        theirs = json.loads(cli.stdout)
        assert [h["chunk_hash"] for h in ours] == [h["chunk_hash"] for h in theirs]  # one engine
        assert [round(h["score"], 6) for h in ours] == [round(h["score"], 6) for h in theirs]
        chunk = ours[0]["chunk_hash"]
        assert "KESTREL-11" in ours[0]["content"]
        expand = ui.get(f"/expand?chunk={chunk}").body
        assert "Claude Code traced it to atomic saves" in expand
        link = re.search(r'href="(/transcript\?[^"]+)">conversation', expand)
        assert link, expand
        conversation = ui.get(link.group(1).replace("&amp;", "&")).body
        assert CLAUDE_QUESTION in conversation
        assert re.search(rf'class="turn turn-user selected" id="turn-{CLAUDE_TURN}"', conversation)
        path, line = entry_line(world.memory, "KESTREL-11")
        by_entry = ui.get(f"/expand?journal={path.name}&line={line}").body  # a timeline entry opens the same
        assert f"chunk={chunk}" in by_entry
        window = ui.get("/search?q=atomic+saves&since=2d").body
        assert "Time window:" in window
        bad = ui.get("/search?q=x&since=someday")
        assert bad.status == 400 and "Error: " in bad.body and 'name="q"' in bad.body


def test_an_expansion_of_several_entries_links_each_conversation(isolated_env: Path) -> None:
    """One chunk can hold several entries (two anchored turns under one heading, written by hand or
    by another tool): the expansion links each one's conversation, named, not only the first's."""
    world = journal_world(isolated_env)
    (journal,) = [p for p in world.memory.glob("2*.md") if "KESTREL-11" in p.read_text()]
    text = journal.read_text()
    first = "- Claude Code traced it to atomic saves.\n"
    transcript = next(world.home.glob(".claude/projects/*/*.jsonl"))
    second = f"<!-- session:{CLAUDE_SESSION} turn:t-second transcript:{transcript} -->\n"
    journal.write_text(text.replace(first, first + second + "- User asked to pin the fix (PLOVER-5).\n", 1))
    with running_console(cwd=world.project) as ui:
        hit = json.loads(ui.get("/api/search?q=pin+the+fix+PLOVER-5").body)["hits"][0]
        assert "PLOVER-5" in hit["content"] and "KESTREL-11" in hit["content"]
        expand = ui.get(f"/expand?chunk={hit['chunk_hash']}").body
        links = re.findall(r'href="(/transcript\?[^"]+)">(conversation[^<]*)<', expand)
        assert [name for _, name in links] == [
            f"conversation (Claude Code, turn {CLAUDE_TURN})",
            "conversation (Claude Code, turn t-second)",
        ], expand
        assert "turn=t-second" in links[1][0].replace("&amp;", "&")
        opened = ui.get(links[0][0].replace("&amp;", "&")).body
        assert re.search(rf'class="turn turn-user selected" id="turn-{CLAUDE_TURN}"', opened)


def test_a_conversation_memsearch_did_not_record_is_not_opened(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    planted = isolated_env / "elsewhere.jsonl"
    planted.write_text((Path(__file__).parent / "fixtures" / "transcripts" / "claude.jsonl").read_text())
    with (world.memory / sorted(p.name for p in world.memory.glob("2*.md"))[0]).open("a") as journal:
        journal.write(f"### 23:30\n<!-- session:x turn:y transcript:{planted} -->\n- Shipped (TERN-1).\n\n")
    with running_console(cwd=world.project) as ui:
        refused = ui.get(f"/transcript?path={planted}")
        assert refused.status == 400 and CLAUDE_QUESTION not in refused.body
        hit = json.loads(ui.get("/api/search?q=TERN-1+shipped").body)["hits"][0]
        assert "not one memsearch recorded" in ui.get(f"/expand?chunk={hit['chunk_hash']}").body


# --- actions ---------------------------------------------------------------------------------------------


def test_forget_from_a_timeline_entry_as_the_cli_does(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    path, line = entry_line(world.memory, "OSPREY-33")
    with running_console(cwd=world.project) as ui:
        assert "OSPREY-33" in json.dumps(json.loads(ui.get("/api/search?q=OSPREY-33+queue").body))
        confirm = ui.get(f"/forget?journal={path.name}&line={line}").body
        assert "Will forget 1 block:" in confirm and "OpenCode picked the fast queue" in confirm
        blocks = re.findall(r'name="block" value="([^"]+)"', confirm)
        form = {"csrf": ui.csrf(), "journal": path.name, "line": line, "block": blocks, "next": "/"}
        done = ui.post("/act/forget", form)
        assert done.status == 303
        flash = ui.get(done.headers["location"]).body
        assert "Forgot 1 block: 1 file rewritten" in flash
        assert "OSPREY-33" not in path.read_text()
        assert "KESTREL-11" in path.read_text()  # the other entries stay
        hits = json.loads(ui.get("/api/search?q=OSPREY-33+invoice+exporter+queue").body)["hits"]
        assert not any("OSPREY-33" in h["content"] for h in hits)
        collection = ("--collection", derive_collection(world.project))
        cli = memsearch("search", "OSPREY-33 invoice exporter queue", "-j", *collection, cwd=world.project)
        assert cli.returncode == 0 and "OSPREY-33" not in cli.stdout  # another process, same store


def test_forget_of_memory_that_changed_meanwhile_forgets_nothing(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    path, line = entry_line(world.memory, "GANNET-55")
    with running_console(cwd=world.project) as ui:
        confirm = ui.get(f"/forget?journal={path.name}&line={line}").body
        blocks = re.findall(r'name="block" value="([^"]+)"', confirm)
        path.write_text(path.read_text().replace("GANNET-55", "GANNET-56"))
        form = {"csrf": ui.csrf(), "journal": path.name, "line": line, "block": blocks}
        answer = ui.post("/act/forget", form, headers={"Accept": "application/json"})
        assert answer.status == 400
        assert json.loads(answer.body)["message"].startswith("Error: the memory changed since")
    assert "GANNET-56" in path.read_text()


def test_accepting_a_skill_installs_it_as_skills_install_would(isolated_env: Path, tmp_path: Path) -> None:
    world = journal_world(isolated_env)
    body = tmp_path / "body.md"
    body.write_text("1. Run the tests.\n2. Tag the release.\n")
    for name in ("release-steps", "tidy-logs"):
        added = memsearch(
            "skills",
            "add",
            "--name",
            name,
            "--description",
            f"How to {name}.",
            "--body-file",
            str(body),
            cwd=world.project,
        )
        assert added.returncode == 0, added.stderr
    with running_console(cwd=world.project) as ui:
        inbox = ui.get("/inbox").body
        assert 'data-skill="release-steps"' in inbox and 'data-skill="tidy-logs"' in inbox
        assert "Review (2)" in inbox  # the navigation's badge
        form = {"csrf": ui.csrf(), "slug": "release-steps", "platform": "claude-code", "next": "/inbox"}
        done = ui.post("/act/skill-accept", form)
        assert done.status == 303
        assert "Installed: " in ui.get(done.headers["location"]).body
        rejected = ui.post("/act/skill-reject", {"csrf": ui.csrf(), "slug": "tidy-logs", "next": "/inbox"})
        assert rejected.status == 303
        after = ui.get("/inbox").body
        assert "release-steps" not in after and "tidy-logs" not in after
    installed = world.project / ".claude" / "skills" / "release-steps" / "SKILL.md"
    candidate = world.memsearch_dir / "skill-candidates" / "release-steps" / "SKILL.md"
    assert installed.read_bytes() == candidate.read_bytes()
    listed = {c["slug"]: c for c in json.loads(memsearch("skills", "list", "-j", cwd=world.project).stdout)}
    assert listed["release-steps"]["status"] == "installed"
    assert listed["release-steps"]["installed_paths"] == [str(installed)]
    assert listed["tidy-logs"]["status"] == "rejected"
    hint = memsearch("skills", "status", "--hint", cwd=world.project)
    assert hint.stdout == ""  # nothing waits for review any more


def _rewrite_project_md(world_project: Path, content: str) -> None:
    """A real maintenance run of project_review, its model answering ``content`` (the model is
    the one part faked: a paid API)."""
    from memsearch import maintenance
    from memsearch.agent.hooks.base import HookContext, HookInput
    from memsearch.agent.hooks.engine import get_platform

    ctx = HookContext.build(get_platform("claude-code"), "maintenance", HookInput(cwd=str(world_project)))
    answer = json.dumps({"action": "replace", "content": content, "reason": "the journals moved on"})
    (outcome,) = maintenance.run_tasks(
        ctx, only=["project_review"], force=True, explicit=True, ask=lambda run, prompt: answer
    )
    assert outcome.action == "replace", outcome


def test_maintenance_changes_are_kept_or_reverted(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = journal_world(isolated_env)
    monkeypatch.chdir(world.project)
    project_md = world.memsearch_dir / "PROJECT.md"
    project_md.write_text("# Project\n\nThe old truth.\n")
    _rewrite_project_md(world.project, "# Project\n\nThe new truth (ALBATROSS-1).\n")
    _rewrite_project_md(world.project, "# Project\n\nThe newest truth (ALBATROSS-2).\n")
    with running_console(cwd=world.project) as ui:
        inbox = ui.get("/inbox").body
        runs = re.findall(r'data-run="([^"]+)"', inbox)
        assert len(runs) == 2
        assert '<span class="add">+The newest truth (ALBATROSS-2).</span>' in inbox
        assert '<span class="del">-The old truth.</span>' in inbox
        newest, older = runs
        refused = ui.post(
            "/act/run-revert", {"csrf": ui.csrf(), "run": older}, headers={"Accept": "application/json"}
        )
        assert refused.status == 400 and "changed since run" in refused.body  # a later run wrote it
        assert ui.post("/act/run-revert", {"csrf": ui.csrf(), "run": newest}).status == 303
        assert "ALBATROSS-1" in project_md.read_text()
        assert ui.post("/act/run-keep", {"csrf": ui.csrf(), "run": older}).status == 303
        assert "data-run=" not in ui.get("/inbox").body
        found = json.loads(ui.get("/api/search?q=ALBATROSS+truth").body)["hits"]
        assert any("ALBATROSS-1" in h["content"] for h in found)
        assert not any("ALBATROSS-2" in h["content"] for h in found)  # reindexed after the revert
    history = json.loads(memsearch("maintenance", "history", "--all", "-j", cwd=world.project).stdout)
    assert [r["status"] for r in history] == ["reverted", "kept"]


def test_secrets_found_by_scan_are_redacted_from_the_inbox(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    key = corpus.SECRETS["stripe-key"]
    journal = sorted(world.memory.glob("2*.md"))[0]
    with journal.open("a") as fh:
        fh.write(f"### 22:00\n- Billing used {key} in the test (SKUA-5).\n\n")
    before = journal.read_bytes()
    with running_console(cwd=world.project) as ui:
        inbox = ui.get("/inbox").body
        assert f"{journal.name}:" in inbox and "stripe-key" in inbox and key not in inbox
        assert "No forget or redaction of this project is kept." in inbox
        done = ui.post("/act/redact", {"csrf": ui.csrf(), "next": "/inbox"})
        assert done.status == 303
        flash = ui.get(done.headers["location"]).body
        assert "Redacted 1 item in" in flash and "memsearch scan --restore" in flash
        inbox = ui.get("/inbox").body
        assert "No secrets found by scan." in inbox and key not in inbox
        assert key not in journal.read_text() and "[REDACTED:stripe-key]" in journal.read_text()
        assert memsearch("scan", cwd=world.project).returncode == 0
        (backup,) = re.findall(r'data-backup="([^"]+)"', inbox)  # the journal as it was, kept
        restored = ui.post("/act/restore", {"csrf": ui.csrf(), "backup": backup, "next": "/inbox"})
        assert "Restored backup" in ui.get(restored.headers["location"]).body
        assert "No forget or redaction of this project is kept." in ui.get("/inbox").body
    assert journal.read_bytes() == before  # scan --restore's own operation: byte for byte


def test_a_note_forgotten_from_a_hit_comes_back_from_the_inbox(isolated_env: Path) -> None:
    world = journal_world(isolated_env)
    note = world.memory / "runbook.md"
    note.write_bytes(b"# Runbook\n\n## Pager\n\nPage the PETREL-4 rota first.\r\n\n## Backups\n\nNightly.\n")
    before = note.read_bytes()
    with running_console(cwd=world.project) as ui:
        assert (
            memsearch(
                "index",
                str(world.memory),
                "--collection",
                derive_collection(world.project),
                cwd=world.project,
            ).returncode
            == 0
        )
        hit = json.loads(ui.get("/api/search?q=PETREL-4+pager+rota").body)["hits"][0]
        assert "PETREL-4" in hit["content"]
        confirm = ui.get(f"/forget?chunk={hit['chunk_hash']}").body
        assert "is kept for a restore" in confirm
        blocks = re.findall(r'name="block" value="([^"]+)"', confirm)
        form = {"csrf": ui.csrf(), "chunk": hit["chunk_hash"], "block": blocks, "next": "/inbox"}
        flash = ui.get(ui.post("/act/forget", form).headers["location"]).body
        assert "Kept the notes as they were" in flash and "memsearch forget --undo" in flash
        assert "PETREL-4" not in note.read_text() and "Nightly." in note.read_text()
        (backup,) = re.findall(r'data-backup="([^"]+)"', ui.get("/inbox").body)
        ui.post("/act/restore", {"csrf": ui.csrf(), "backup": backup, "next": "/inbox"})
        hits = json.loads(ui.get("/api/search?q=PETREL-4+pager+rota").body)["hits"]
        assert any("PETREL-4" in h["content"] for h in hits)  # indexed again
        bogus = ui.post(
            "/act/restore", {"csrf": ui.csrf(), "backup": "../x"}, headers={"Accept": "application/json"}
        )
        assert bogus.status == 400 and "no backup" in json.loads(bogus.body)["message"]
    assert note.read_bytes() == before


def test_duplicated_and_superseded_entries_wait_for_review(isolated_env: Path) -> None:
    import datetime as dt

    from memsearch.engine.journal import JournalEntry, append_entry

    world = journal_world(isolated_env)
    noon = dt.datetime.combine(dt.date.today(), dt.time(20, 0))
    append_entry(
        world.memory, JournalEntry(["Codex moved the staging database to port 6543 (HERON-22)."]), when=noon
    )
    two = ["OpenCode picked the fast queue for the invoice exporter (OSPREY-33).", "And documented it."]
    append_entry(world.memory, JournalEntry(two), when=noon + dt.timedelta(minutes=5))
    with running_console(cwd=world.project) as ui:
        inbox = ui.get("/inbox").body
        section = inbox[inbox.index('id="duplicates"') :]
        assert section.count('class="finding duplicate"') == 1
        assert section.count('class="finding superseded"') == 1
        assert "forget the first" in section


# --- what memory did ----------------------------------------------------------------------------------


def test_what_memory_did_is_what_stats_recall_prints(isolated_env: Path) -> None:
    from memsearch.agent import recall_log
    from memsearch.agent.hooks.collection import derive_collection
    from memsearch.config import resolve_config

    world = journal_world(isolated_env)
    collection = derive_collection(world.project)
    cfg = resolve_config()
    for session, host in (("s-1", "claude-code"), ("s-2", "codex")):
        recall_log.record(cfg, collection, "inject", session=session, host=host, tokens=120)
        recall_log.record(cfg, collection, "capture", session=session, host=host)
    recall_log.record(cfg, collection, "search", session="s-1", host="claude-code", query="port", hits=3)
    recall_log.record(cfg, collection, "expand", session="s-1", host="claude-code")
    recall_log.record_llm(
        cfg, collection, "summary", "native:claude-code", "a prompt " * 40, "- a bullet", 1.5
    )
    recall_log.record_llm(cfg, collection, "maintenance:project_review", "native", "p " * 10, None, 0.5)
    with running_console(cwd=world.project) as ui:
        ours = json.loads(ui.get("/api/activity?days=7").body)
        page = ui.get("/activity?days=7").body
    cli = memsearch("stats", "--recall", "--json-output", "--collection", collection, cwd=world.project)
    assert cli.returncode == 0, cli.stderr
    theirs = json.loads(cli.stdout)
    assert ours == theirs
    assert theirs["totals"]["sessions"] == 2 and theirs["totals"]["never_consulted"] == 1
    assert theirs["totals"]["llm_calls"] == 2
    for key, value in theirs["totals"].items():
        assert f'<dd data-total="{key}">{value}</dd>' in page
    assert '<script type="application/json" id="recall-data">' in page
    assert "never consulted" in page and "maintenance:project_review" in page


# --- many processes, one memory ---------------------------------------------------------------------------


def test_the_console_sees_what_other_processes_write(isolated_env: Path) -> None:
    """While the console runs (it owns the store here: autostart is off), a journal entry indexed
    by ``memsearch watch``, Claude Code's Stop hook (a real hook process: it writes and indexes its
    entry), the MCP server's ``remember`` and the CLI's ``forget`` all show: in the timeline (the
    files), in its searches (the store, through its owner), and in the stamp its pages ask for to
    update themselves."""
    import datetime as dt
    import os
    import shutil
    import subprocess
    import sys

    from console_run import wait_until
    from memsearch.engine.journal import JournalEntry, append_entry

    world = journal_world(isolated_env)
    with running_console(cwd=world.project) as ui:
        assert json.loads(ui.get("/api/search?q=KESTREL-11").body)["hits"]  # the console owns the store
        stamp = json.loads(ui.get("/api/version").body)["version"]
        watching = ("--no-follow-links", "--collection", derive_collection(world.project))
        watch = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "watch", str(world.memory), *watching],
            cwd=world.project,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(2)
            when = dt.datetime.now()
            append_entry(world.memory, JournalEntry(["Hook wrote this turn (LOON-12)."]), when=when)
            wait_until(lambda: json.loads(ui.get("/api/version").body)["version"] != stamp, 30, "a new stamp")
            assert "LOON-12" in ui.get("/").body
            wait_until(
                lambda: any(
                    "LOON-12" in h["content"]
                    for h in json.loads(ui.get("/api/search?q=LOON-12").body)["hits"]
                ),
                60,
                "watch's indexing seen by the console's search",
            )
        finally:
            watch.terminate()
            watch.wait(timeout=60)
        stamp = json.loads(ui.get("/api/version").body)["version"]
        transcript = isolated_env / "claude-projects" / f"{HOOK_SESSION}.jsonl"
        transcript.parent.mkdir()
        shutil.copyfile(HOOK_TRANSCRIPT, transcript)
        stop = {"session_id": HOOK_SESSION, "transcript_path": str(transcript), "cwd": str(world.project)}
        hooked = subprocess.run(  # Claude Code's Stop hook, as the plugin's shim runs it
            [sys.executable, "-m", "memsearch", "hook", "claude-code", "stop"],
            input=json.dumps({**stop, "hook_event_name": "Stop", "stop_hook_active": False}),
            cwd=world.project,
            env={**os.environ, "MEMSEARCH_HOOK_SYNC": "1", "MEMSEARCH_NO_WATCH": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert hooked.returncode == 0, hooked.stderr
        wait_until(lambda: json.loads(ui.get("/api/version").body)["version"] != stamp, 30, "a new stamp")
        assert re.search(r'data-host="claude-code">.*?Switch totals\.py to Decimal', ui.get("/").body, re.S)
        hits = json.loads(ui.get("/api/search?q=Decimal+per-line+rounding+billing").body)["hits"]
        assert any("Switch totals.py to Decimal" in h["content"] for h in hits)  # the hook indexed it
        remembered = _mcp_remember(world.project, "The backup window is 02:00 UTC (GREBE-9).")
        assert "Remembered in" in remembered
        assert "GREBE-9" in ui.get("/").body and "MCP remember" in ui.get("/?host=mcp").body
        hits = json.loads(ui.get("/api/search?q=GREBE-9+backup+window").body)["hits"]
        assert any("GREBE-9" in h["content"] for h in hits)
        collection = ("--collection", derive_collection(world.project))
        gone = memsearch("forget", "--session", CLAUDE_SESSION, "--yes", *collection, cwd=world.project)
        assert gone.returncode == 0, gone.stderr
        assert "KESTREL-11" not in ui.get("/").body


#: Claude Code's session of the hook tests (tests/fixtures/hooks): its last turn asks for Decimal totals.
HOOK_TRANSCRIPT = Path(__file__).parent / "fixtures" / "hooks" / "claude-session.jsonl"
HOOK_SESSION = "7c1e9a52-3b4d-4f60-9a8e-0d2c4b6e8f10"


def _mcp_remember(project: Path, note: str) -> str:
    """``remember`` through the MCP SDK's own client, against ``memsearch mcp`` in ``project``."""
    import asyncio
    import os
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def call() -> str:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memsearch", "mcp"], cwd=str(project), env=dict(os.environ)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("remember", {"note": note})
            return "".join(getattr(c, "text", "") for c in result.content)

    return asyncio.run(call())


# --- the command ------------------------------------------------------------------------------------


def test_all_projects_are_the_memory_folders_memsearch_wrote(isolated_env: Path) -> None:
    """``--all``: every memory folder memsearch's journal writer wrote into (its own record), the
    timeline and search over all of them, the inbox one project at a time."""
    from memsearch.engine.journal import JournalEntry, append_entry
    from memsearch.engine.written import memory_folders

    first = journal_world(isolated_env)
    other = isolated_env / "other" / "shop"
    (other / ".git").mkdir(parents=True)
    append_entry(other / ".memsearch" / "memory", JournalEntry(["The shop ships on Fridays (CORMORANT-3)."]))
    assert memory_folders() == [first.memory, other / ".memsearch" / "memory"]
    with running_console("--all", cwd=isolated_env) as ui:
        page = ui.get("/").body
        assert "CORMORANT-3" in page and "KESTREL-11" in page
        assert '<span class="project">shop</span>' in page and '<span class="project">project</span>' in page
        hits = json.loads(ui.get("/api/search?q=shop+ships+Fridays").body)["hits"]
        assert "CORMORANT-3" in hits[0]["content"]
        keys = dict(re.findall(r'<option value="([0-9a-f]{12})"[^>]*>([^<]+) \(', page))
        assert sorted(keys.values()) == ["project", "shop"]
        shop = next(k for k, v in keys.items() if v == "shop")
        only = ui.get(f"/?p={shop}").body
        assert "CORMORANT-3" in only and "KESTREL-11" not in only
        assert "Pick a project:" in ui.get("/inbox").body


def test_a_taken_port_is_one_error_line(isolated_env: Path) -> None:
    import socket

    world = journal_world(isolated_env)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = memsearch("ui", "--no-open", "--port", str(port), cwd=world.project, timeout=60)
    assert proc.returncode == 1
    assert (
        proc.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}")
        and "Hint: pick another --port" in proc.stderr
    )
    assert "Traceback" not in proc.stderr and proc.stdout == ""
