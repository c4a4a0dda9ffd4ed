"""memsearch.heap: freed memory goes back to the system (glibc), in a real child process."""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import threading
from memsearch import heap

def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1024

kept = []
def work():  # ~100 MB in 2 kB blocks on a thread's arena, all freed but the last
    junk = [bytes(2000) for _ in range(50_000)]
    kept.append(junk.pop())  # pins the arena's top: free() alone cannot give the pages back
    del junk

assert heap.limit_arenas(2)
thread = threading.Thread(target=work)
thread.start()
thread.join()
before = rss()
assert heap.trim()
print(before, rss())
"""


def test_trim_gives_freed_arena_memory_back() -> None:
    if not sys.platform.startswith("linux"):  # no glibc: the calls say they did nothing
        from memsearch import heap

        assert not heap.trim() and not heap.limit_arenas()
        return
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, after = map(float, proc.stdout.split())
    assert before - after > 50, (before, after)  # MB


def test_trim_every_stops_when_told() -> None:
    import threading

    from memsearch import heap

    stop = threading.Event()
    thread = heap.trim_every(0.01, stop)
    if thread is None:  # no glibc: nothing to trim, and nothing runs
        assert not heap.trim()
        return
    stop.set()
    thread.join(2)
    assert not thread.is_alive()
