"""The OpenCode capture daemon: polls OpenCode's SQLite database and journals each finished turn.

OpenCode has no hook that fires when a turn ends with its transcript, so the plugin starts this
daemon (``python -m memsearch.agent.hooks.opencode_daemon``, run in the project folder). Each pass:

1. opens OpenCode's database read-only and lists the sessions whose ``directory`` is the project
   or a folder inside it (the original also matched any path containing the project's *name*,
   capturing other projects' sessions);
2. for each session, reads the messages after the session's checkpoint, kept in a sidecar SQLite
   database ``<memsearch dir>/opencode-turns.db`` (never in OpenCode's own database);
3. captures every turn that is finished — followed by another user message, or with a final
   assistant answer (``finish`` set and not ``tool-calls``) and no change for
   ``MEMSEARCH_OPENCODE_TAIL_QUIET_MS`` milliseconds — through the shared ``stop`` handler, which
   skips turns already in the journal, summarises and writes the entry;
4. advances the checkpoint only after the entry is written (a crash re-reads the turn, and the
   journal's dedup keeps it single).

The daemon exits when the process that started it (OpenCode) is gone, on SIGTERM, or after one
pass with ``--once``. When OpenCode is gone it first makes a last pass that takes the tail turn as
OpenCode left it, once it has an answer: nothing will change it any more, and a one-shot
``opencode run`` (OpenCode 1.18.33 exits as soon as the answer is printed) would otherwise never
have its turn journaled. (Quitting the TUI of 1.18.33 right after an answer can leave that message
without ``finish``, so the last pass does not ask for it.) The plugin
starts it in a session of its own, so quitting the TUI (a hang-up of OpenCode's process group)
does not cut that pass short. ``MEMSEARCH_DIR`` is honoured: the sidecar and journal go there.

The daemon is handed the OpenCode platform row (by its ``daemon`` action, or by the ``__main__``
entry) instead of importing it: the row names the daemon as its action, and a module importing
the row back would make an import cycle.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsearch.agent.hooks.base import HookContext, HookInput, Platform, disabled
from memsearch.agent.hooks.collection import absolute_path
from memsearch.agent.hooks.summarize import log
from memsearch.files import atomic_write, lock_file

__all__ = ["PendingTurn", "Sidecar", "daemon_action", "main", "pending_turns", "project_sessions", "run_pass"]

SIDECAR = "opencode-turns.db"
#: Overrides where OpenCode's database is looked for.
DB_ENV = "MEMSEARCH_OPENCODE_DB"
PID_FILE = ".capture.pid"
QUIET_ENV = "MEMSEARCH_OPENCODE_TAIL_QUIET_MS"
#: How long a final answer must stay unchanged before its turn counts as finished (ms).
DEFAULT_QUIET_MS = 30_000
#: Sessions looked at per pass, most recently updated first.
MAX_SESSIONS = 50


@dataclass(frozen=True)
class PendingTurn:
    """A finished turn not yet captured: its user message id and where the checkpoint moves to."""

    session: str
    turn_id: str
    time: int
    message_id: str


class Sidecar:
    """The per-session checkpoints: ``(time_created, id)`` of the last captured user message."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(path, timeout=10)
        self.con.execute(
            "CREATE TABLE IF NOT EXISTS turn_state (session_id TEXT PRIMARY KEY, "
            "last_completed_time INTEGER NOT NULL, last_completed_message_id TEXT NOT NULL, "
            "time_updated INTEGER NOT NULL)"
        )
        self.con.commit()

    def checkpoint(self, session: str) -> tuple[int, str]:
        row = self.con.execute(
            "SELECT last_completed_time, last_completed_message_id FROM turn_state WHERE session_id = ?",
            (session,),
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else (-1, "")

    def advance(self, turn: PendingTurn) -> None:
        self.con.execute(
            "INSERT INTO turn_state VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "last_completed_time = excluded.last_completed_time, "
            "last_completed_message_id = excluded.last_completed_message_id, "
            "time_updated = excluded.time_updated",
            (turn.session, turn.time, turn.message_id, int(time.time() * 1000)),
        )
        self.con.commit()

    def close(self) -> None:
        self.con.close()


def _connect_ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True, timeout=5)


def _like_prefix(folder: str) -> str:
    escaped = folder.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.rstrip("/") + "/%"


def project_sessions(con: sqlite3.Connection, project: Path) -> list[str]:
    """Sessions run in ``project`` or a folder inside it, most recently updated first."""
    folder = str(project)
    rows = con.execute(
        "SELECT id FROM session WHERE directory = ? OR directory LIKE ? ESCAPE '\\' "
        "ORDER BY time_updated DESC LIMIT ?",
        (folder, _like_prefix(folder), MAX_SESSIONS),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _data(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def pending_turns(
    con: sqlite3.Connection,
    session: str,
    after: tuple[int, str],
    now_ms: int,
    quiet_ms: int,
    final: bool = False,
) -> list[PendingTurn]:
    """The finished turns of ``session`` whose user message comes after the checkpoint ``after``.

    ``final`` (OpenCode has exited): the tail turn counts as finished once it has an answer.
    """
    rows = con.execute(
        "SELECT id, time_created, time_updated, data FROM message WHERE session_id = ? "
        "ORDER BY time_created, id",
        (session,),
    ).fetchall()
    texts = {
        str(r[0])
        for r in con.execute("SELECT message_id, data FROM part WHERE session_id = ?", (session,))
        if _data(r[1]).get("type") == "text" and not _data(r[1]).get("synthetic")
    }
    turns: list[dict[str, Any]] = []
    for message_id, created, updated, raw in rows:
        data = _data(raw)
        role = data.get("role")
        if role == "user" and message_id in texts:
            turns.append(
                {
                    "id": message_id,
                    "time": int(created),
                    "last": int(updated or created),
                    "finish": None,
                    "answered": False,
                }
            )
        elif role == "assistant" and turns:
            turns[-1]["last"] = max(turns[-1]["last"], int(updated or created))
            if message_id in texts:
                turns[-1]["finish"] = data.get("finish")
                turns[-1]["answered"] = True
    ready: list[PendingTurn] = []
    for index, turn in enumerate(turns):
        if (turn["time"], turn["id"]) <= after:
            continue
        is_tail = index == len(turns) - 1
        finished = turn["finish"] not in (None, "", "tool-calls") and now_ms - turn["last"] >= quiet_ms
        if is_tail and not finished and not (final and turn["answered"]):
            break
        ready.append(PendingTurn(session, turn["id"], turn["time"], turn["id"]))
    return ready


def _quiet_ms(env: Mapping[str, str]) -> int:
    from memsearch.config.envvars import env_number

    value = env_number(QUIET_ENV, env)
    return DEFAULT_QUIET_MS if value is None else int(value)


def run_pass(
    platform: Platform, project: Path, db: Path, env: Mapping[str, str] | None = None, *, final: bool = False
) -> int:
    """One poll: capture every finished, not yet captured turn of the project's sessions.

    ``final``: the last pass after OpenCode exited (no quiet window; see :func:`pending_turns`).
    Returns how many turns were journaled (duplicates skipped by the journal do not count).
    """
    from memsearch.agent.hooks.events import finish_capture
    from memsearch.engine import journal

    env = os.environ if env is None else env
    base = HookContext.build(platform, "stop", HookInput(cwd=str(project)), env)
    if not db.is_file():
        return 0
    con = _connect_ro(db)
    sidecar = Sidecar(base.memsearch_dir / SIDECAR)
    written = 0
    try:
        now_ms = int(time.time() * 1000)
        for session in project_sessions(con, base.project_dir):
            quiet = 0 if final else _quiet_ms(env)
            for turn in pending_turns(con, session, sidecar.checkpoint(session), now_ms, quiet, final):
                raw = {"session_id": session, "turn_id": turn.turn_id, "db": str(db), "cwd": str(project)}
                ctx = HookContext.build(platform, "stop", platform.read_input(raw), env, dt.datetime.now())
                capture = platform.capture(ctx)
                if capture is not None:
                    probe = journal.JournalEntry(["-"], capture.anchor, capture.identity)
                    if journal.find_duplicate(ctx.memory_dir, probe, ctx.now) is None:
                        if not ctx.plugin.summarize.enabled:
                            return written  # capture is off: keep the checkpoint where it is
                        written += finish_capture(ctx, capture).written
                sidecar.advance(turn)
    finally:
        sidecar.close()
        con.close()
    return written


def _running_daemon(pid_file: Path) -> bool:
    """Whether the pid file names a live capture daemon (not a recycled pid of something else)."""
    from memsearch.agent.hooks import processes

    pid = processes.read_pid(pid_file)
    if pid is None or pid == os.getpid():
        return False
    return processes.is_running(pid, ["memsearch.agent.hooks.opencode_daemon"]) or processes.is_running(
        pid, ["hook", "opencode", "daemon"]
    )


def _parent_alive(parent: int) -> bool:
    return parent <= 1 or os.getppid() == parent


#: Seconds between two looks at whether OpenCode (or the daemon we wait for) is still there.
PARENT_CHECK = 0.25
#: Held during every pass, so two daemons of one project never summarise the same turn twice.
PASS_LOCK = ".capture.lock"


def _wait(parent: int, seconds: float) -> bool:
    """Sleep up to ``seconds``, waking early when OpenCode exits; whether it is still alive."""
    deadline = time.monotonic() + seconds
    while _parent_alive(parent):
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(PARENT_CHECK, left))
    return False


def _defer(pid_file: Path, parent: int) -> bool:
    """Wait while another daemon polls this project; whether this one must poll after all.

    A daemon that polls owns ``.capture.pid`` and gives it up when its OpenCode exits, before its
    last pass. So: our OpenCode exits while the owner still polls → the owner journals our turns
    (False); the owner is gone or draining → we poll (True).
    """
    while _running_daemon(pid_file):
        if not _parent_alive(parent):
            return False
        time.sleep(PARENT_CHECK)
    return True


def _locked_pass(platform: Platform, project: Path, db: Path, lock: Path, final: bool) -> None:
    try:
        with lock_file(lock, mode=0o666):
            run_pass(platform, project, db, final=final)
    except Exception as exc:  # one bad pass must not end capture for the session
        log(f"opencode capture pass failed: {type(exc).__name__}: {exc}")


def default_db(env: Mapping[str, str]) -> Path:
    """``MEMSEARCH_OPENCODE_DB``, else ``$XDG_DATA_HOME/opencode/opencode.db``, else
    ``~/.local/share/opencode/opencode.db`` (where OpenCode keeps its sessions)."""
    explicit = env.get(DB_ENV, "").strip()
    if explicit:
        return Path(absolute_path(explicit))
    data = env.get("XDG_DATA_HOME", "").strip()
    base = Path(data) if data else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return base / "opencode" / "opencode.db"


def main(platform: Platform, argv: Sequence[str] | None = None) -> int:
    """``python -m memsearch.agent.hooks.opencode_daemon [--db PATH] [--poll-interval S] [--once]``."""
    from memsearch.agent.hooks import processes

    parser = argparse.ArgumentParser(prog="memsearch-opencode-daemon", description=__doc__.splitlines()[0])
    parser.add_argument("project", nargs="?", default=os.getcwd(), help="the OpenCode worktree")
    parser.add_argument("--db", default=None, help="OpenCode's database (default: where OpenCode keeps it)")
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    project = Path(args.project).resolve()
    db = Path(args.db) if args.db else default_db(os.environ)
    if args.once:
        print(run_pass(platform, project, db))
        return 0
    memsearch_dir = HookContext.build(platform, "stop", HookInput(cwd=str(project))).memsearch_dir
    pid_file, lock = memsearch_dir / PID_FILE, memsearch_dir / PASS_LOCK
    parent = os.getppid()

    def stop(_signum: int, _frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    if not _defer(pid_file, parent):
        return 0  # another OpenCode window of this project polls, and will journal our turns
    memsearch_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(pid_file, str(os.getpid()))  # replaces a link planted there, never writes through it

    def release() -> None:
        with contextlib.suppress(OSError):
            if processes.read_pid(pid_file) == os.getpid():
                pid_file.unlink()

    try:
        while _parent_alive(parent):
            _locked_pass(platform, project, db, lock, final=False)
            _wait(parent, args.poll_interval)
        release()  # a daemon started now polls instead of waiting for this one
        _locked_pass(platform, project, db, lock, final=True)
    finally:
        release()
    return 0


def daemon_action(platform: Platform, _options: Mapping[str, Any]) -> str:
    """The ``memsearch hook opencode daemon`` action (the OpenCode row's ``actions``): the daemon
    for the folder the command runs in, until OpenCode exits (never inside a nested agent)."""
    if disabled():
        return ""
    main(platform, [])
    return ""


if __name__ == "__main__":  # pragma: no cover - exercised as a subprocess by the tests
    from memsearch.agent.hooks.opencode import PLATFORM

    sys.exit(main(PLATFORM))
