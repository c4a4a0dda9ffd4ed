"""Search in time on a real store (Milvus Lite, the default ONNX model): ``since``/``until``, time
phrases in the query, recency weighting, through the API, the CLI and the memory service."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cli_process import memsearch
from memsearch import MemSearch
from memsearch.engine.interface import Memory
from memsearch.errors import InvalidDateError
from memsearch.service.client import ServiceClient
from memsearch.service.paths import service_paths
from test_service import start_service

pytestmark = pytest.mark.model

ZONE = "Asia/Shanghai"
TODAY = dt.datetime.now(ZoneInfo(ZONE)).date()
#: The original's result keys and ``relevance``: a search without a window or a half-life returns
#: exactly these.
PLAIN_KEYS = {
    "relevance",
    "content",
    "source",
    "heading",
    "chunk_hash",
    "heading_level",
    "start_line",
    "end_line",
    "score",
}


def day(back: int) -> dt.date:
    return TODAY - dt.timedelta(days=back)


def journal(folder: Path, back: int, time: str, bullet: str) -> Path:
    path = folder / f"{day(back).isoformat()}.md"
    path.write_text(f"\n## Session {time}\n\n### {time}\n- {bullet}\n\n", encoding="utf-8")
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    folder.mkdir()
    journal(folder, 10, "09:10", "Decided the retry policy: exponential backoff with five attempts.")
    journal(folder, 1, "14:00", "Changed the retry policy to three attempts with jitter.")
    journal(folder, 0, "08:30", "The retry policy now also covers the export job.")
    old = folder / "retry-notes.md"
    old.write_text("# Retry notes\n\nThe retry policy is written up in RETRY.md.\n", encoding="utf-8")
    when = dt.datetime.combine(day(40), dt.time(12)).timestamp()
    os.utime(old, (when, when))  # a hand note last changed 40 days ago: dated by its mtime
    return folder


@pytest.fixture
def uri(tmp_path: Path, memory: Path) -> str:
    uri = str(tmp_path / "time.db")
    proc = memsearch("index", str(memory), "--milvus-uri", uri)
    assert proc.returncode == 0, proc.stderr
    return uri


@pytest.fixture(autouse=True)
def _tzset_after() -> Iterator[None]:
    """Tests set ``TZ`` with monkeypatch; this (autouse, so torn down after it) applies the restored one."""
    yield
    time.tzset()


def in_zone(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()


def names(hits: list[dict[str, object]]) -> list[str]:
    return sorted(Path(str(h["source"])).name for h in hits)


def test_api_windows_phrases_and_recency(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    in_zone(monkeypatch, ZONE)
    query = "retry policy"
    with Memory(MemSearch(milvus_uri=uri)) as ms:
        plain = ms.search(query, top_k=10)
        assert len(plain) == 4 and all(set(h) == PLAIN_KEYS for h in plain)  # untouched

        recent = ms.search(query, top_k=10, since=day(1), today=TODAY)
        assert names(recent) == [f"{day(1)}.md", f"{day(0)}.md"]
        assert {h["date"] for h in recent} == {day(1).isoformat(), day(0).isoformat()}
        assert {h["time"] for h in recent} == {"14:00", "08:30"}
        assert all(h["in_window"] and h["window"]["since"] == day(1).isoformat() for h in recent)

        older = ms.search(query, top_k=10, until=dt.datetime.combine(day(2), dt.time(23)), today=TODAY)
        assert names(older) == [f"{day(10)}.md", "retry-notes.md"]
        note = next(h for h in older if h["source"].endswith("retry-notes.md"))
        assert note["date"] == day(40).isoformat() and "time" not in note

        assert names(ms.search(query, since="7d", until="2d", today=TODAY)) == []

        # a phrase: taken out of the text (the same hits and scores as the bare words in that
        # window), the window reported on every hit
        phrased = ms.search(f"what changed in the {query} yesterday", top_k=10, today=TODAY)
        bare = ms.search(f"what changed in the {query}", top_k=10, since=day(1), until=day(1), today=TODAY)
        assert names(phrased) == [f"{day(1)}.md"]
        assert [h["score"] for h in phrased] == [h["score"] for h in bare]
        assert phrased[0]["window"] == {"since": str(day(1)), "until": str(day(1)), "phrase": "yesterday"}
        zh = ms.search("重试策略 三天前", top_k=10, today=TODAY + dt.timedelta(days=2))
        assert names(zh) == [f"{day(1)}.md"] and zh[0]["window"]["phrase"] == "三天前"

        # no phrase reading: the words are searched as written, every day
        as_written = ms.search(f"{query} yesterday", top_k=10, time_phrases=False)
        assert len(as_written) == 4 and all(set(h) == PLAIN_KEYS for h in as_written)

        # a phrase whose window holds nothing: hits of any day, marked out of the window
        empty = ms.search(f"{query} in March", top_k=10, today=dt.date(2099, 4, 2))
        assert len(empty) == 4 and not any(h["in_window"] for h in empty)

        weighted = ms.search(query, top_k=10, recency_half_life=10, today=TODAY)
        by_hash = {h["chunk_hash"]: h["score"] for h in plain}
        for hit in weighted:
            age = (TODAY - dt.date.fromisoformat(hit["date"])).days
            assert hit["score"] == pytest.approx(by_hash[hit["chunk_hash"]] * 0.5 ** (age / 10))
        assert names(weighted[-1:]) == ["retry-notes.md"]  # 40 days old: four half-lives

        with pytest.raises(InvalidDateError):
            ms.search(query, since="the other day")


def test_cli_since_until_phrases_and_errors(uri: str) -> None:
    env = {"TZ": ZONE}
    proc = memsearch(
        "search", "retry policy", "--since", str(day(1)), "-j", "-k", "10", "--milvus-uri", uri, env=env
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert names(hits) == [f"{day(1)}.md", f"{day(0)}.md"]
    assert f"Time window: {day(1)}..…" in proc.stderr

    proc = memsearch(
        "search",
        "what did we change yesterday about the retry policy",
        "-k",
        "10",
        "--milvus-uri",
        uri,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("--- Result") == 1 and f"Date: {day(1)} 14:00" in proc.stdout
    assert (
        f'Time window: {day(1)} (from "yesterday"; searched for "what did we change about the retry policy")'
        in proc.stderr
    )

    proc = memsearch(
        "search",
        "retry policy yesterday",
        "--no-time-phrases",
        "-j",
        "-k",
        "10",
        "--milvus-uri",
        uri,
        env=env,
    )
    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == 4 and proc.stderr == ""

    proc = memsearch("search", "retry policy", "--recency-half-life", "1", "-j", "--milvus-uri", uri, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["date"] == str(day(0))

    for flags in (
        ["--since", "whenever"],
        ["--since", "2026-12-02", "--until", "2026-12-01"],
        ["--until", "2026-02-30"],
    ):
        proc = memsearch("search", "retry policy", *flags, "--milvus-uri", uri, env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and "Hint:" in lines[0], proc.stderr


def test_far_days_are_days_and_an_impossible_one_is_one_error_line(uri: str) -> None:
    """The calendar's own ends are days (the window's midnights used to overflow: tracebacks); a
    relative form past them is one ``Error:`` line. Asia/Shanghai is east of UTC, where year 1's
    local midnight is before anything ``mktime`` can name."""
    env = {"TZ": ZONE}

    def search(*args: str) -> tuple[int, list[dict[str, object]], str]:
        proc = memsearch("search", *args, "-j", "-k", "10", "--milvus-uri", uri, env=env)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else [], proc.stderr

    for bounds in (
        ["--until", "9999-12-31"],
        ["--since", "0001-01-01"],
        ["--since", "0001-01-01", "--until", "9999-12-31"],
    ):
        code, hits, err = search("retry policy", *bounds)
        assert code == 0 and len(hits) == 4, err
    code, hits, err = search("retry policy", "--since", "9999-12-31")
    assert code == 0 and hits == [], err
    # a phrase naming a far day: its window holds nothing, so every day's hits, marked outside it
    code, hits, err = search("retry policy on 9999-12-31")
    assert code == 0 and len(hits) == 4 and not any(h["in_window"] for h in hits), err
    assert {h["window"]["since"] for h in hits} == {"9999-12-31"}
    for value in ("9999y", "99999m"):
        code, _hits, err = search("retry policy", "--since", value)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith(
            f"Error: '{value}' is out of range: days run from 0001-01-01 to 9999-12-31"
        )
        assert "Hint:" in lines[0]


def test_through_the_memory_service_in_the_callers_time_zone(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process owns the store; a window goes there as days of the caller's own today."""
    service = start_service(uri, env={"TZ": "Pacific/Pago_Pago"})  # UTC-11: its today is not ours
    try:
        in_zone(monkeypatch, "Pacific/Kiritimati")  # UTC+14
        caller_today = dt.datetime.now(ZoneInfo("Pacific/Kiritimati")).date()
        with Memory(MemSearch(milvus_uri=uri)) as ms:
            hits = ms.search("retry policy", top_k=10, since=day(1), until=day(0))
            assert names(hits) == [f"{day(1)}.md", f"{day(0)}.md"]
            phrase = ms.search("retry policy today", top_k=10, today=TODAY)
            assert names(phrase) == [f"{day(0)}.md"]
            # the service answered (it holds the store) and resolved "today" as the caller's day
            assert ServiceClient(service_paths(uri)).ping().get("pid") == service.pid
            mine = ms.search("retry policy today", top_k=10)
            assert {h["window"]["since"] for h in mine} <= {caller_today.isoformat()}
            with pytest.raises(InvalidDateError):
                ms.search("retry policy", until="nope")
            # the service resolves a far window too (it used to fail with an internal error)
            far = ms.search("retry policy", top_k=10, since="0001-01-01", until="9999-12-31")
            assert len(far) == 4
        proc = memsearch(
            "search", "retry policy", "--until", str(day(2)), "-j", "-k", "10", "--milvus-uri", uri
        )
        assert proc.returncode == 0, proc.stderr
        assert names(json.loads(proc.stdout)) == [f"{day(10)}.md", "retry-notes.md"]
    finally:
        service.terminate()
        service.wait(timeout=30)


def test_recency_half_life_from_the_config_file(uri: str, isolated_env: Path) -> None:
    (isolated_env / ".memsearch.toml").write_text("[search]\nrecency_half_life = 1\n", encoding="utf-8")
    proc = memsearch("search", "retry policy", "-j", "-k", "4", "--milvus-uri", uri, env={"TZ": ZONE})
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert [h["date"] for h in hits] == sorted((h["date"] for h in hits), reverse=True)  # newest first
    proc = memsearch("search", "retry policy", "--recency-half-life", "-1", "--milvus-uri", uri)
    assert proc.returncode == 2 and "-1" in proc.stderr


def test_recent_is_a_timeline_read_from_the_markdown(memory: Path, isolated_env: Path) -> None:
    """No store, no model: the journals of the last days by name, the notes by modification time."""
    (memory / "2026-01-01.md").write_text("### 10:00\n- long ago\n", encoding="utf-8")
    with (memory / f"{day(1)}.md").open("a", encoding="utf-8") as fh:
        fh.write("### 16:45\n<!-- session:abc123 turn:t1 -->\n- Shipped the export fix\n- second bullet\n\n")
    fresh = memory / "plans.md"
    fresh.write_text("# Export plans\n\nMove the export to a queue.\n", encoding="utf-8")
    env = {"TZ": ZONE}
    proc = memsearch("recent", str(memory), "--days", "3", "-j", env=env)
    assert proc.returncode == 0, proc.stderr
    days = json.loads(proc.stdout)
    assert [d["date"] for d in days] == [str(day(0)), str(day(1))]  # newest first; 10 days ago left out
    today, yesterday = days
    assert [e["summary"] for e in yesterday["entries"]] == [
        "Changed the retry policy to three attempts with jitter.",
        "Shipped the export fix",
    ]
    assert yesterday["entries"][1] | {"source": ""} == {
        "time": "16:45", "session": "abc123", "summary": "Shipped the export fix", "source": "", "line": 7,
        "host": "", "anchor": {"session": "abc123", "turn": "t1"},  # no host writes just these fields
    }  # fmt: skip
    assert [n["title"] for n in today["notes"]] == ["Export plans"]
    assert "retry-notes.md" not in proc.stdout  # changed 40 days ago

    plain = memsearch("recent", str(memory), "--days", "30", env=env)
    assert plain.returncode == 0, plain.stderr
    assert f"{day(10)} " in plain.stdout and "[session abc123]" in plain.stdout
    assert "note: Export plans" in plain.stdout

    # default: the project's memory folder (the plugins' .memsearch/memory at the git root)
    project = isolated_env / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    shutil.copytree(memory, project / ".memsearch" / "memory")
    proc = memsearch("recent", "--days", "1", cwd=project / "sub", env=env)
    assert proc.returncode == 0 and "The retry policy now also covers the export job." in proc.stdout
    assert (
        memsearch(
            "recent",
            "--days",
            "1",
            cwd=isolated_env,
            env={**env, "MEMSEARCH_DIR": str(project / ".memsearch")},
        ).returncode
        == 0
    )
    missing = memsearch("recent", cwd=isolated_env)
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no memory folder at ")
    assert memsearch("recent", str(memory), "--days", "0").returncode == 2
