"""Background processes the hooks start, and how they stop exactly those and nothing else.

- :func:`spawn_detached` starts a process in its own session, so the hook returns at once and the
  host killing the hook's process group does not kill it.
- A pid file records what was started. Before a pid is signalled its command line is read back
  (``/proc/<pid>/cmdline``, or ``ps`` where there is no ``/proc``) and must be *our* command for
  *this* memory folder: a recycled pid, or another project's watch, is never touched. Nothing is
  ever killed by name (the original killed every Milvus Lite process on the machine).
- The watch of a memory folder is shared by the processes that use it, listed in
  ``.watch.sessions`` as ``<key> <pid> <start time>``: SessionStart adds its session with the host
  process (the agent that ran the hook), Stop adds the detached capture worker it starts (which
  removes itself when done), and SessionEnd removes its session, stopping the watch when no live
  user is left — one session ending never stops another's watch. Every step holds
  ``.processes.lock``.
- A host may end without SessionEnd (Claude Code 2.1.197 in ``claude -p`` with an async hook
  pending), or be killed. So the watch checks the list itself (:func:`guard_watch`, ``memsearch watch
  --users-file``) and exits once no listed process has been alive for :data:`WATCH_IDLE_GRACE`
  seconds. The start time recorded with each pid keeps a recycled pid from counting as alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memsearch.engine.project_files import read_project_text
from memsearch.files import atomic_write, lock_file, open_own

__all__ = [
    "INDEX_PID",
    "WATCH_PID",
    "WATCH_SESSIONS",
    "WatchUser",
    "command_line",
    "guard_watch",
    "hold_watch",
    "host_process",
    "index_argv",
    "is_running",
    "memsearch_argv",
    "process_start",
    "read_pid",
    "release_watch",
    "retain_watch",
    "spawn_detached",
    "start_index",
    "stop_process",
    "watch_argv",
]

WATCH_PID = ".watch.pid"
WATCH_SESSIONS = ".watch.sessions"
#: Held while the pid files are read and written (watch and one-shot index alike).
PROCESS_LOCK = ".processes.lock"
WATCH_LOG = ".watch.log"
INDEX_PID = ".index.pid"
INDEX_LOG = ".index.log"
#: Seconds a stopped process gets to exit after SIGTERM before SIGKILL.
STOP_GRACE = 8.0
#: Seconds between the watch's looks at its users, and how long it stays up with none alive.
WATCH_POLL = 2.0
WATCH_IDLE_GRACE = 10.0
#: Processes between an agent and its hook that are not the agent: shells and launchers.
LAUNCHERS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "fish", "env", "nice", "nohup", "timeout", "uv", "uvx"}
)


def memsearch_argv(*args: str) -> list[str]:
    """Run memsearch with this very interpreter, so a child uses the same install as the hook."""
    return [sys.executable, "-m", "memsearch", *args]


def watch_argv(
    memory_dir: Path, collection: str, description: str, users_file: Path | None = None
) -> list[str]:
    """The watch a hook starts; with ``users_file`` it stops by itself when nobody uses it."""
    argv = index_argv(memory_dir, collection, description, command="watch")
    return [*argv, "--users-file", str(users_file)] if users_file is not None else argv


def index_argv(memory_dir: Path, collection: str, description: str, *, command: str = "index") -> list[str]:
    """``memsearch index`` (or ``watch``) of a project's memory folder: contained
    (``--no-follow-links``), since a cloned repository may ship links there to the user's files.
    The folder stays right after the command word, where :func:`is_running` looks for it."""
    return memsearch_argv(
        command,
        str(memory_dir),
        "--collection",
        collection,
        "--description",
        description,
        "--no-follow-links",
    )


def spawn_detached(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    stdin_data: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    append: bool = False,
) -> int:
    """Start ``argv`` in a new session, output to ``log`` (or nowhere), and return its pid.

    The log is truncated first unless ``append`` (several workers sharing one log).
    ``stdin_data`` is written to the child's stdin, which is then closed; the call does not wait
    for the child.
    """
    out: int = subprocess.DEVNULL
    if log is not None:  # a FIFO or link planted under the log's name is refused (OSError)
        out = open_own(log, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o666)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        if log is not None:
            os.close(out)  # the child holds its own descriptor
    if stdin_data is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin_data)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    # The child outlives us on purpose; mark it handled so Popen does not warn when collected.
    proc.returncode = 0
    return proc.pid


def command_line(pid: int) -> list[str] | None:
    """The argv of a running process, or None when it is gone (or cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None  # /proc exists and the pid is not in it: gone
        return _ps_command_line(pid)
    except OSError:
        return None
    if not raw:
        return None  # a zombie has an empty command line
    return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")]


def _ps_command_line(pid: int) -> list[str] | None:
    try:
        out = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split() if out else None


def is_running(pid: int | None, expected: Sequence[str]) -> bool:
    """Whether ``pid`` is alive and its command line contains ``expected`` as consecutive words.

    ``expected`` is the tail of the argv we started (``memsearch``, ``watch``, ``<dir>``, ...), so a
    recycled pid or a watch on another folder does not match.
    """
    if pid is None or pid <= 0:
        return False
    argv = command_line(pid)
    if argv is None:
        return False
    want = list(expected)
    if len(argv) == 1 and " " in argv[0]:  # from ps: one string
        return " ".join(want) in argv[0]
    return any(argv[i : i + len(want)] == want for i in range(len(argv) - len(want) + 1))


def _stat_fields(pid: int) -> tuple[str, list[str]] | None:
    """``(name, fields after the name)`` of ``/proc/<pid>/stat``; None without /proc or the pid."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    return head.partition("(")[2], rest.split()


def _ps(pid: int, field: str) -> str:
    try:
        out = subprocess.run(
            ["ps", "-o", f"{field}=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip()


def process_start(pid: int) -> str:
    """When ``pid`` started, as an opaque token ("" when it is gone): with the pid, it names one
    process for good, since a recycled pid has another start time."""
    if pid <= 0:
        return ""
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[1][19] if len(fields[1]) > 19 and fields[1][0] != "Z" else ""
    if Path("/proc/self").exists():
        return ""  # /proc exists and the pid is not in it: gone
    return _ps(pid, "lstart")


def _parent(pid: int) -> tuple[int, str]:
    """``(parent pid, parent's name)`` of ``pid``; ``(0, "")`` when unknown."""
    fields = _stat_fields(pid)
    if fields is not None:
        ppid = int(fields[1][1]) if len(fields[1]) > 1 and fields[1][1].isdigit() else 0
    else:
        text = _ps(pid, "ppid")
        ppid = int(text) if text.isdigit() else 0
    if ppid <= 1:
        return 0, ""
    named = _stat_fields(ppid)
    name = named[0] if named is not None else Path(_ps(ppid, "comm")).name
    return ppid, name


def host_process() -> int:
    """The agent that ran this hook: the nearest ancestor that is not a shell or launcher
    (Claude Code 2.1.197 runs ``/bin/sh -c 'bash run.sh <event>'``, and run.sh runs memsearch).
    0 when it cannot be told."""
    pid = os.getpid()
    for _ in range(8):
        pid, name = _parent(pid)
        if pid <= 0:
            return 0
        if name not in LAUNCHERS:
            return pid
    return 0


@dataclass(frozen=True)
class WatchUser:
    """One line of ``.watch.sessions``: who uses the watch, and the process whose life counts."""

    key: str  # a session id, or ``capture-<pid>`` for a capture worker
    pid: int = 0
    start: str = ""  # :func:`process_start` of ``pid`` when it was recorded

    @classmethod
    def of(cls, key: str, pid: int) -> WatchUser:
        return cls(key, pid, process_start(pid)) if pid > 0 else cls(key)

    @classmethod
    def parse(cls, line: str) -> WatchUser:
        """A line as written by :meth:`line`; an older line holding only a session id has no process."""
        key, _, rest = line.strip().partition(" ")
        pid, _, start = rest.partition(" ")
        return cls(key, int(pid), start) if pid.isdigit() else cls(key)

    def line(self) -> str:
        return f"{self.key} {self.pid} {self.start}" if self.pid > 0 and self.start else self.key

    def alive(self) -> bool:
        """Whether the recorded process still runs (a user with no known process never counts)."""
        return self.pid > 0 and bool(self.start) and process_start(self.pid) == self.start


def read_pid(path: Path) -> int | None:
    """The pid recorded in ``path``; None when it is missing, garbled or refused (a project file:
    a cloned repository may ship a FIFO or a link under the name)."""
    try:
        return int(read_project_text(path, path.parent).split()[0])
    except (ValueError, IndexError):
        return None


def stop_process(pid: int, expected: Sequence[str], grace: float = STOP_GRACE) -> bool:
    """SIGTERM ``pid`` if it is ours (see :func:`is_running`), SIGKILL after ``grace`` seconds.

    Returns True when it was ours and is gone.
    """
    if not is_running(pid, expected):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not is_running(pid, expected):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def _read_users(path: Path) -> list[WatchUser]:
    lines = read_project_text(path, path.parent).splitlines()
    return [WatchUser.parse(line) for line in lines if line.strip()]


def _write_users(path: Path, users: Sequence[WatchUser]) -> None:
    atomic_write(path, "".join(f"{u.line()}\n" for u in users))


def _watch_tail(memory_dir: Path) -> list[str]:
    return ["memsearch", "watch", str(memory_dir)]


def retain_watch(
    memsearch_dir: Path,
    memory_dir: Path,
    user: WatchUser,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, bool]:
    """Make sure a watch of ``memory_dir`` runs and count ``user`` as one of its users.

    Returns ``(pid, started)``: ``started`` is False when a watch of this folder was already
    running (another session's, or this session's after a resume) and was reused. Users whose
    process is gone are dropped on the way.
    """
    pid_file = memsearch_dir / WATCH_PID
    users_file = memsearch_dir / WATCH_SESSIONS
    with lock_file(memsearch_dir / PROCESS_LOCK):
        pid = read_pid(pid_file)
        users = [u for u in _read_users(users_file) if u.key != user.key and u.alive()]
        started = not is_running(pid, _watch_tail(memory_dir))
        if started:
            pid = spawn_detached(argv, log=memsearch_dir / WATCH_LOG, env=env, cwd=cwd)
            atomic_write(pid_file, f"{pid}\n")
            users = []
        _write_users(users_file, [*users, user])
    assert pid is not None
    return pid, started


def hold_watch(memsearch_dir: Path, memory_dir: Path, user: WatchUser) -> bool:
    """Count ``user`` as a user of the running watch (none is started). True if one runs."""
    users_file = memsearch_dir / WATCH_SESSIONS
    with lock_file(memsearch_dir / PROCESS_LOCK):
        if not is_running(read_pid(memsearch_dir / WATCH_PID), _watch_tail(memory_dir)):
            return False
        users = [u for u in _read_users(users_file) if u.key != user.key]
        _write_users(users_file, [*users, user])
    return True


def release_watch(memsearch_dir: Path, memory_dir: Path, key: str) -> bool:
    """Stop counting the user ``key``; stop the watch when no live user is left. True if stopped.

    Only the recorded pid is signalled, and only if its command line is the watch of this folder.
    The records go first: Claude Code 2.1.197 gives SessionEnd hooks about 1.5 s whatever their
    ``timeout`` and kills them then, possibly while the watch is still shutting down.
    """
    pid_file = memsearch_dir / WATCH_PID
    users_file = memsearch_dir / WATCH_SESSIONS
    if not pid_file.exists():
        return False
    with lock_file(memsearch_dir / PROCESS_LOCK):
        users = [u for u in _read_users(users_file) if u.key != key and u.alive()]
        if users:
            _write_users(users_file, users)
            return False
        pid = read_pid(pid_file)
        for path in (pid_file, users_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return pid is not None and stop_process(pid, _watch_tail(memory_dir))


def guard_watch(
    users_file: Path,
    on_unused: Callable[[], None],
    *,
    poll: float = WATCH_POLL,
    grace: float = WATCH_IDLE_GRACE,
) -> threading.Thread:
    """Watch ``users_file`` from a daemon thread; call ``on_unused`` once no user listed there has
    been alive for ``grace`` seconds (a missing file lists nobody).

    The last look is taken under ``.processes.lock``, and this process's pid file and users file
    are removed under it, so a SessionStart racing with the exit starts a new watch instead of
    joining this one.
    """
    memsearch_dir = users_file.parent

    def in_use() -> bool:
        return any(u.alive() for u in _read_users(users_file))

    def run() -> None:
        last_used = time.monotonic()
        while True:
            time.sleep(poll)
            if in_use():
                last_used = time.monotonic()
                continue
            if time.monotonic() - last_used < grace:
                continue
            with lock_file(memsearch_dir / PROCESS_LOCK):
                if in_use():
                    last_used = time.monotonic()
                    continue
                if read_pid(memsearch_dir / WATCH_PID) == os.getpid():
                    for path in (memsearch_dir / WATCH_PID, users_file):
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
            on_unused()
            return

    thread = threading.Thread(target=run, name="memsearch-watch-guard", daemon=True)
    thread.start()
    return thread


def start_index(
    memsearch_dir: Path,
    memory_dir: Path,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int | None:
    """Start a one-shot background index of ``memory_dir`` unless one is still running.

    Returns the new pid, or None when the previous run is still going.
    """
    pid_file = memsearch_dir / INDEX_PID
    with lock_file(memsearch_dir / PROCESS_LOCK):
        if is_running(read_pid(pid_file), ["memsearch", "index", str(memory_dir)]):
            return None
        pid = spawn_detached(argv, log=memsearch_dir / INDEX_LOG, env=env, cwd=cwd)
        atomic_write(pid_file, f"{pid}\n")
    return pid
