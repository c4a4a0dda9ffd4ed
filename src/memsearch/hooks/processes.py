"""Background processes the hooks start, and how they stop exactly those and nothing else.

- :func:`spawn_detached` starts a process in its own session, so the hook returns at once and the
  host killing the hook's process group does not kill it.
- A pid file records what was started. Before a pid is signalled its command line is read back
  (``/proc/<pid>/cmdline``, or ``ps`` where there is no ``/proc``) and must be *our* command for
  *this* memory folder: a recycled pid, or another project's watch, is never touched. Nothing is
  ever killed by name (the original killed every Milvus Lite process on the machine,
  reference-plugins §12.24).
- The watch of a memory folder is shared by the sessions that use it: SessionStart adds its
  session to ``.watch.sessions`` (starting the watch if none runs) and SessionEnd removes it,
  stopping the watch only when no session is left — one session ending never stops another's watch.
  Both steps hold ``.processes.lock``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = [
    "INDEX_PID",
    "WATCH_PID",
    "WATCH_SESSIONS",
    "command_line",
    "index_argv",
    "is_running",
    "memsearch_argv",
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


def memsearch_argv(*args: str) -> list[str]:
    """Run memsearch with this very interpreter, so a child uses the same install as the hook."""
    return [sys.executable, "-m", "memsearch", *args]


def watch_argv(memory_dir: Path, collection: str, description: str) -> list[str]:
    return memsearch_argv("watch", str(memory_dir), "--collection", collection, "--description", description)


def index_argv(memory_dir: Path, collection: str, description: str) -> list[str]:
    return memsearch_argv("index", str(memory_dir), "--collection", collection, "--description", description)


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
    out = open(log, "ab" if append else "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
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
        if log is not None and not isinstance(out, int):
            out.close()  # the child holds its own descriptor
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


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_sessions(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    except OSError:
        return []


def _watch_tail(memory_dir: Path) -> list[str]:
    return ["memsearch", "watch", str(memory_dir)]


def retain_watch(
    memsearch_dir: Path,
    memory_dir: Path,
    session: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, bool]:
    """Make sure a watch of ``memory_dir`` runs and count ``session`` as one of its users.

    Returns ``(pid, started)``: ``started`` is False when a watch of this folder was already
    running (another session's, or this session's after a resume) and was reused.
    """
    pid_file = memsearch_dir / WATCH_PID
    sessions_file = memsearch_dir / WATCH_SESSIONS
    with _locked(memsearch_dir / PROCESS_LOCK):
        pid = read_pid(pid_file)
        sessions = _read_sessions(sessions_file)
        started = not is_running(pid, _watch_tail(memory_dir))
        if started:
            pid = spawn_detached(argv, log=memsearch_dir / WATCH_LOG, env=env, cwd=cwd)
            _write_atomic(pid_file, f"{pid}\n")
            sessions = []
        if session not in sessions:
            sessions.append(session)
        _write_atomic(sessions_file, "".join(f"{s}\n" for s in sessions))
    assert pid is not None
    return pid, started


def release_watch(memsearch_dir: Path, memory_dir: Path, session: str) -> bool:
    """Stop counting ``session``; stop the watch when it was the last one. True if it was stopped.

    Only the recorded pid is signalled, and only if its command line is the watch of this folder.
    """
    pid_file = memsearch_dir / WATCH_PID
    sessions_file = memsearch_dir / WATCH_SESSIONS
    if not pid_file.exists():
        return False
    with _locked(memsearch_dir / PROCESS_LOCK):
        sessions = [s for s in _read_sessions(sessions_file) if s != session]
        if sessions:
            _write_atomic(sessions_file, "".join(f"{s}\n" for s in sessions))
            return False
        pid = read_pid(pid_file)
        stopped = pid is not None and stop_process(pid, _watch_tail(memory_dir))
        for path in (pid_file, sessions_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return stopped


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
    with _locked(memsearch_dir / PROCESS_LOCK):
        if is_running(read_pid(pid_file), ["memsearch", "index", str(memory_dir)]):
            return None
        pid = spawn_detached(argv, log=memsearch_dir / INDEX_LOG, env=env, cwd=cwd)
        _write_atomic(pid_file, f"{pid}\n")
    return pid
