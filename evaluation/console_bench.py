"""``make bench``'s console row: how long the console's timeline takes for a year of journals.

The issue's target: a project with 365 days and 20,000 entries loads its timeline in under 300 ms.
A project of that size is written in the hooks' journal format (a ``## Session`` heading, ``###
HH:MM`` entries with every host's anchor shape, two bullets each), a real ``memsearch ui`` process
serves it, and the timeline page (``GET /``, the token as a bearer header) is fetched over HTTP:
the first request (nothing cached in the console, the files cold to it) and ``repeat`` more. Ours
alone: the original has no console. Run by ``python -m evaluation.bench`` (row ``console``) or on
its own: ``python -m evaluation.console_bench``.
"""

from __future__ import annotations

import datetime as dt
import http.client
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEY = "console"
NAME = "console timeline page, {days} days, {entries:,} entries"
TARGET = 0.300  # seconds

#: Anchor shapes of the hosts' captures (``{n}`` is the entry's number).
ANCHORS = (
    "<!-- session:s{n} turn:u{n} transcript:/home/u/.claude/projects/p/s{n}.jsonl -->",
    "<!-- session:c{n} rollout:/home/u/.codex/sessions/r{n}.jsonl turn_id:t{n} -->",
    "<!-- session:ses_{n} turn:msg_{n} db:/home/u/.local/share/opencode/opencode.db -->",
    "<!-- session:oc{n} transcript:/home/u/.openclaw/agents/main/agent/openclaw-agent.sqlite turn:e{n} -->",
    "<!-- session:session-{n} turn:1 db:/home/u/.dsh/sessions/session-{n}.jsonl.zst -->",
    "<!-- via:mcp -->",
)


def write_project(root: Path, days: int, entries: int) -> Path:
    """A git project whose memory folder holds ``days`` journals with ``entries`` entries in all."""
    memory = root / ".memsearch" / "memory"
    memory.mkdir(parents=True)
    (root / ".git").mkdir()
    today = dt.date.today()
    n = 0
    for day in range(days):
        date = today - dt.timedelta(days=day)
        count = entries // days + (1 if day < entries % days else 0)
        parts = [f"# {date.isoformat()}\n"]
        for k in range(count):
            hour, minute = 8 + (k * 12) // 60 % 14, (k * 12) % 60
            if k % 5 == 0:
                parts.append(f"\n## Session {hour:02d}:{minute:02d}\n\n")
            parts.append(
                f"### {hour:02d}:{minute:02d}\n{ANCHORS[n % len(ANCHORS)].format(n=n)}\n"
                f"- User asked about item {n} of the migration plan and the retry budget.\n"
                f"- The agent changed the exporter's queue settings and wrote a test for case {n}.\n\n"
            )
            n += 1
        (memory / f"{date.isoformat()}.md").write_text("".join(parts), encoding="utf-8")
    return root


def _get(port: int, token: str) -> float:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", "/", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    seconds = time.perf_counter() - started
    if response.status != 200 or b'class="entry"' not in body:
        raise SystemExit(f"the console answered {response.status} to its timeline")
    return seconds


def timeline_seconds(work: Path, repeat: int, days: int = 365, entries: int = 20_000) -> list[float]:
    """The first timeline request's seconds, then ``repeat`` more, on a fresh project and HOME."""
    project = write_project(work / "console-project", days, entries)
    home = work / "console-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "MEMSEARCH_SERVICE_AUTOSTART": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "ui", "--no-open", "--port", "0"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"127\.0\.0\.1:(\d+)/\?token=(\S+)", proc.stdout.readline())
        if not found:
            raise SystemExit(f"memsearch ui did not start: {proc.communicate()[1][-2000:]}")
        port, token = int(found.group(1)), found.group(2)
        return [_get(port, token) for _ in range(repeat + 1)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def table(work: Path, repeat: int, days: int = 365, entries: int = 20_000) -> str:
    """The console's table: its row, the first request and the median of the others."""
    seconds = timeline_seconds(work, repeat, days, entries)
    first, median = seconds[0], statistics.median(seconds[1:] or seconds)
    verdict = "✔" if max(first, median) < TARGET else "✘"
    name = NAME.format(days=days, entries=entries)
    return "\n".join(
        [
            "| figure | ours, first request | ours, median of the next | target | verdict | N |",
            "|---|---|---|---|---|---|",
            f"| {name} | {first * 1000:.1f} ms | {median * 1000:.1f} ms | < {TARGET * 1000:.0f} ms "
            f"| {verdict} | {len(seconds) - 1} |",
        ]
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="memsearch-console-bench-") as folder:
        print(table(Path(folder), repeat=int(sys.argv[1]) if len(sys.argv) > 1 else 5))
