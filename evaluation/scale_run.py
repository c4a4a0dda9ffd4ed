"""How the scale bench runs and times one thing: a command, a service, a group of client processes.

Everything here measures from outside, as a user would see it: wall time of a command, the
latencies a client process records around each ``MemSearch.search``, a service process's resident
memory from ``/proc``. Counts come from separate runs that are never timed: ``strace`` for the
markdown files a command stats and opens, and the row counter (``evaluation/scale_probe``) for the
rows it reads from its store.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evaluation.scale_setup import Tool

PROBE = Path(__file__).resolve().parent / "scale_probe"


class ScaleError(SystemExit):
    """A figure could not be produced: the bench stops (non-zero) rather than print a hole."""


def run(tool: Tool, *args: str, env: dict[str, str] | None = None, check: bool = True) -> tuple[float, str]:
    """Run one CLI command of ``tool`` to its end: (wall seconds, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run(
        tool.command(*args),
        env=tool.env(**(env or {})),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tool.home,
    )
    took = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise ScaleError(
            f"{tool.name}: `{' '.join(args)}` failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return took, proc.stdout


_STAT = re.compile(r'(?:stat|lstat|newfstatat|statx|fstatat64)\((?:[^,]+, )?"([^"]*)"')
_OPEN = re.compile(r'open(?:at)?\((?:[^,]+, )?"([^"]*)"')


def counted(tool: Tool, *args: str, env: dict[str, str] | None = None) -> dict[str, int]:
    """One untimed run of a command under ``strace`` and the row counter: markdown files it stat'ed
    and opened (calls on a ``.md`` path), and the rows it read from its store."""
    with tempfile.TemporaryDirectory() as tmp:
        trace, rows = Path(tmp) / "trace", Path(tmp) / "rows.json"
        more = {
            **(env or {}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROBE), tool.env().get("PYTHONPATH", "")])),
            "MEMSEARCH_SCALE_ROWS": str(rows),
        }
        if shutil.which("strace") is None:
            raise ScaleError("the counting runs need strace (apt-get install strace)")
        calls = "trace=stat,lstat,newfstatat,statx,open,openat"
        command = ["strace", "-f", "-qq", "-o", str(trace), "-e", calls]
        proc = subprocess.run(
            [*command, *tool.command(*args)],
            env=tool.env(**more),
            capture_output=True,
            text=True,
            cwd=tool.home,
        )
        if proc.returncode != 0:
            raise ScaleError(f"{tool.name}: `{' '.join(args)}` under strace failed:\n{proc.stderr[-3000:]}")
        stats = opens = 0
        for line in trace.read_text(errors="replace").splitlines():
            stat, opened = _STAT.search(line), _OPEN.search(line)
            stats += bool(stat and stat[1].endswith(".md"))
            opens += bool(opened and opened[1].endswith(".md"))
        read = json.loads(rows.read_text()) if rows.exists() else {"rows": 0}
    return {"stats": stats, "opens": opens, "rows": int(read["rows"])}


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def rss_mb(pid: int) -> float:
    """Resident memory of one process, from /proc (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# --- searching from client processes -------------------------------------------------------------

#: One client process: ``MemSearch`` on the store (ours: the service's client when one runs, else
#: the owner itself), one warm-up search, then (after a "go" line on stdin, so that a group of
#: them starts together) every query ``passes`` times; prints each search's seconds and its peak
#: memory. Both tools' constructors take these arguments.
_SEARCHER = r"""
import asyncio, json, resource, sys, time
from memsearch import MemSearch

kwargs, queries, passes, options = (json.loads(a) for a in sys.argv[1:5])

async def main():
    ms = MemSearch(**kwargs)
    try:
        await ms.search(queries[0], top_k=5)
        print("ready", flush=True)
        sys.stdin.readline()
        took = []
        for query in queries * passes:
            start = time.perf_counter()
            await ms.search(query, top_k=5, **options)
            took.append(time.perf_counter() - start)
        return took
    finally:
        ms.close()

took = asyncio.run(main())
print(json.dumps({"took": took, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def search_kwargs(tool: Tool, model_url: str) -> dict[str, Any]:
    """``MemSearch`` arguments of a client of ``tool``'s store (ours: its defaults, the ONNX model;
    the original: the model endpoint)."""
    kwargs: dict[str, Any] = {"milvus_uri": str(tool.db)}
    if tool.name != "ours":
        from evaluation.original import LOCAL_KEY, MODEL

        kwargs.update(
            embedding_provider="openai", embedding_model=MODEL, embedding_base_url=model_url,
            embedding_api_key=LOCAL_KEY,
        )  # fmt: skip
    return kwargs


def searchers(
    tool: Tool,
    kwargs: dict[str, Any],
    queries: list[str],
    *,
    processes: int = 1,
    passes: int = 3,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``processes`` client processes searching at once (see :data:`_SEARCHER`): every search's
    seconds, how many processes failed (and the first failure), their peak memory."""
    args = [json.dumps(kwargs), json.dumps(queries), str(passes), json.dumps(options or {})]
    procs = [
        subprocess.Popen(
            [tool.python, "-c", _SEARCHER, *args],
            env=tool.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tool.home,
        )
        for _ in range(processes)
    ]
    ready = []
    for proc in procs:  # each warms up (the original's: opens the store) before any starts
        assert proc.stdout is not None
        ready.append(proc.stdout.readline().strip() == "ready")
    for proc, ok in zip(procs, ready, strict=True):
        if ok:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
    took: list[float] = []
    failures, first, peak = 0, "", 0.0
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        lines = out.strip().splitlines()
        if proc.returncode != 0 or not lines:
            failures += 1
            first = first or (err.strip().splitlines() or ["?"])[-1][:200]
            continue
        answer = json.loads(lines[-1])
        took += answer["took"]
        peak = max(peak, answer["maxrss_mb"])
    return {"took": took, "failures": failures, "first_failure": first, "maxrss_mb": peak}


def cli_searches(tool: Tool, queries: list[str], *, processes: int, each: int) -> dict[str, Any]:
    """``processes`` loops at once, each running ``memsearch search`` ``each`` times: every
    command's wall seconds, and the commands that failed (with the first failure)."""
    took: list[float] = []
    failed: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(processes)

    def loop(n: int) -> None:
        start.wait()
        for k in range(each):
            query = queries[(n * each + k) % len(queries)]
            begun = time.perf_counter()
            proc = subprocess.run(
                tool.command("search", query, "--top-k", "5"),
                env=tool.env(),
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                cwd=tool.home,
            )
            with lock:
                if proc.returncode == 0:
                    took.append(time.perf_counter() - begun)
                else:
                    failed.append((proc.stderr.strip().splitlines() or ["?"])[-1][:200])

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(processes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"took": took, "failures": len(failed), "first_failure": failed[0] if failed else ""}


# --- a running service, a running watch -----------------------------------------------------------


@contextlib.contextmanager
def serving(tool: Tool) -> Iterator[dict[str, float]]:
    """``memsearch serve`` (ours) on the size's store until the block ends; yields its pid and the
    seconds it took to become ready (its start-up on an existing store: open, warm-up search)."""
    errors = tool.home / "serve.log"
    start = time.perf_counter()
    with errors.open("w") as err:
        proc = subprocess.Popen(tool.command("serve"), env=tool.env(), stdout=err, stderr=err, cwd=tool.home)
    # One process polls every 50 ms (a fresh interpreter per poll would slow the start it times).
    ping = (
        "import sys, time\nfrom memsearch.service.client import ServiceClient\n"
        "from memsearch.service.paths import service_paths\n"
        "while True:\n"
        "    try:\n"
        "        if ServiceClient(service_paths(sys.argv[1])).ping().get('ready'):\n"
        "            break\n"
        "    except Exception:\n"
        "        pass\n"
        "    time.sleep(0.05)\n"
    )
    try:
        waiter = subprocess.Popen([tool.python, "-c", ping, str(tool.db)], env=tool.env(), cwd=tool.home)
        while waiter.poll() is None:
            if proc.poll() is not None:
                waiter.kill()
                raise ScaleError(f"ours: `memsearch serve` exited: {errors.read_text()[-2000:]}")
            time.sleep(0.02)
        yield {"pid": proc.pid, "ready_s": time.perf_counter() - start}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Watch:
    """``memsearch watch PATH`` of one tool, read line by line: how long until it watches, and how
    long from a write to the line that says the file was indexed."""

    def __init__(self, tool: Tool, path: Path, debounce_ms: int) -> None:
        self.tool = tool
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(
            tool.command("watch", str(path), "--debounce-ms", str(debounce_ms)),
            env=tool.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=tool.home,
        )
        self.lines: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append((time.perf_counter(), line.rstrip("\n")))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, after: float, timeout: float = 600) -> float | str:
        """The time of the first line matching ``pattern`` printed after ``after``; or, when the
        watch says it failed (``Failed``) or prints nothing within ``timeout``, what it said."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for when, line in self.lines:
                    if when >= after and re.search(pattern, line):
                        return when
                failed = [
                    i for i, (when, line) in enumerate(self.lines) if when >= after and "Failed" in line
                ]
                if failed:
                    below = [line for _, line in self.lines[failed[0] :] if re.match(r"^\w+Error: ", line)]
                    return (below[0] if below else self.lines[failed[0]][1])[:100]
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    return f"no line within {timeout:g} s"
                self._cond.wait(0.5)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def append_turn(journal: Path, n: int) -> None:
    """A new turn at the end of one journal (what a capture hook writes), different each call."""
    with journal.open("a", encoding="utf-8") as fh:
        fh.write(
            f"\n### 23:{n % 60:02d}\n<!-- session:scale-bench turn:edit-{n} -->\n"
            f"- Scale bench edit {n}: re-ran the billing tests after the change; all green.\n"
        )


def log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)
