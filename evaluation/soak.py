"""``make soak``: a long-running memory service under steady use, its RSS, fds and threads over time.

Why: a service that lives as long as an agent session must not grow. This starts a real
``memsearch watch`` on a generated corpus (the default ONNX model, Milvus Lite), then for
``--minutes`` sends a routed search every ``--search-every`` seconds (as the CLI and the hooks do,
through the service's socket) and edits one journal file every ``--edit-every`` seconds (the watch
re-indexes it). Every ``--sample`` seconds it prints one row: elapsed time, the service's RSS, open
file descriptors, threads, searches done and their p50 latency. The last line compares the RSS
after warm-up (the first sample past 10 % of the run) with the end, so growth is one number.

Usage: ``python -m evaluation.soak [--minutes 30] [--chunks 600]``. Only 127.0.0.1/Unix sockets.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GEN = ROOT / "evaluation" / "gen_corpus.py"


def proc_stats(pid: int) -> tuple[float, int, int]:
    """(RSS in MB, open fds, threads) of a live process, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    rss_mb = int(fields["VmRSS"].split()[0]) / 1024
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss_mb, fds, int(fields["Threads"])


def wait_for_service(uri: str, deadline: float) -> None:
    from memsearch.service.client import connect

    while time.monotonic() < deadline:
        client = connect(uri)
        if client is not None:
            return
        time.sleep(0.5)
    raise SystemExit("the watch's memory service did not come up")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--chunks", type=int, default=600, help="corpus size (generated)")
    parser.add_argument("--search-every", type=float, default=0.1)
    parser.add_argument("--edit-every", type=float, default=2.0)
    parser.add_argument("--sample", type=float, default=60.0)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="memsearch-soak-"))
    home = work / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)  # the service's run dir and manifests live under it
    subprocess.run([sys.executable, str(GEN), str(work / "corpus"), "--chunks", str(args.chunks)], check=True)
    memory = work / "corpus" / "memory"
    uri = str(work / "milvus.db")
    queries = subprocess.run(
        [sys.executable, str(GEN), str(work / "corpus"), "--queries"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    watch = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "watch", str(memory), "--milvus-uri", uri],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "watch.log", "wb"),  # noqa: SIM115 (the child keeps it)
        env=os.environ.copy(),
    )
    try:
        wait_for_service(uri, time.monotonic() + 900)
        from memsearch.cli.flags import config_from_flags
        from memsearch.engine.memory import open_memory

        cfg = config_from_flags({"milvus_uri": uri})

        journal = sorted(memory.glob("*.md"))[len(list(memory.glob("*.md"))) // 2]
        original = journal.read_text(encoding="utf-8")
        start = time.monotonic()
        end = start + args.minutes * 60
        next_edit = start + args.edit_every
        next_sample = start
        latencies: list[float] = []
        searches = edits = 0
        rows: list[tuple[float, float]] = []
        print(
            f"soak: memsearch watch pid {watch.pid}, {args.chunks} chunks, {args.minutes:g} min", flush=True
        )
        print(f"{'min':>6} {'RSS MB':>8} {'fds':>5} {'threads':>7} {'searches':>9} {'p50 ms':>7}", flush=True)
        while (now := time.monotonic()) < end:
            if watch.poll() is not None:
                log = (work / "watch.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"the watch exited ({watch.returncode}):\n{log}")
            if now >= next_sample:
                rss, fds, threads = proc_stats(watch.pid)
                p50 = statistics.median(latencies) * 1000 if latencies else 0.0
                rows.append((now - start, rss))
                print(
                    f"{(now - start) / 60:6.1f} {rss:8.1f} {fds:5d} {threads:7d} {searches:9d} {p50:7.1f}",
                    flush=True,
                )
                latencies.clear()
                next_sample += args.sample
            if now >= next_edit:
                edits += 1
                journal.write_text(
                    original + f"\n### 23:{edits % 60:02d}\n- soak edit {edits}\n", encoding="utf-8"
                )
                next_edit += args.edit_every
            t0 = time.perf_counter()
            with open_memory(cfg) as routed:
                routed.search(queries[searches % len(queries)], top_k=5)
            latencies.append(time.perf_counter() - t0)
            searches += 1
            time.sleep(max(0.0, args.search_every - (time.perf_counter() - t0)))
        rss, fds, threads = proc_stats(watch.pid)
        rows.append((time.monotonic() - start, rss))
        warm = next((r for t, r in rows if t >= 0.1 * args.minutes * 60), rows[0][1])
        print(
            f"{searches} searches, {edits} edits; RSS after warm-up {warm:.1f} MB, at the end {rss:.1f} MB "
            f"({(rss - warm) / warm * 100:+.1f} %), fds {fds}, threads {threads}",
            flush=True,
        )
    finally:
        watch.send_signal(signal.SIGTERM)
        try:
            watch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
