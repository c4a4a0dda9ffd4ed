"""Speed and memory of memsearch beside the original 0.4.23 (``make bench``): one table, both tools.

Both tools index the same generated corpus (``evaluation/gen_corpus.py`` defaults: 2,000 journal
turns, one chunk each) with the same model, all-MiniLM-L6-v2 int8: ours with its packaged
in-process default, the original (installed from the registry into a side venv, see
evaluation/original.py) through a local OpenAI-compatible ``/v1/embeddings`` endpoint on
127.0.0.1 that serves our packaged model, its only offline way.

Every figure is measured in pairs, ours then the original, ``--repeat`` times in alternation, so a
machine whose speed drifts slows both tools alike; the table shows the medians and their ratio.
Each measured command runs as a fresh process with its own HOME, as a user runs the CLI. Peak RSS
is taken per command as the larger of the kernel's high-water mark (``wait4``'s ``ru_maxrss``: the
largest single process of the tree, exact) and the sum of the tree's resident sizes sampled from
/proc every 50 ms (catches a tree of several processes). Any process a measured command leaves
behind (found by a marker variable in its environment) is stopped after the command and counted.

One figure is one small function below; ``ROWS`` puts them in the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script (python evaluation/bench.py): find the package
    sys.path.insert(0, str(ROOT))

from evaluation import console_bench  # noqa: E402
from evaluation.original import (  # noqa: E402
    LOCAL_KEY,
    MODEL,
    original_cli,
    original_python,
    serving_hashed_vectors,
    serving_packaged_model,
)

GEN = ROOT / "evaluation" / "gen_corpus.py"
#: Every measured process carries this variable (a fresh value per command) to find leftovers.
MARKER = "MEMSEARCH_BENCH_RUN"
PAGE = os.sysconf("SC_PAGE_SIZE")


# --- one measured command -------------------------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    rss_mb: float = 0.0
    #: Of ``seconds``, the time the run waited for the embedder (ours' full index: its report).
    model_seconds: float | None = None


class BenchError(SystemExit):
    """A figure could not be produced: the bench stops (non-zero) rather than print a hole."""


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc/*/stat (this kernel has no /proc/*/children)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])  # after the command name, which may hold spaces
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


class TreeSampler(threading.Thread):
    """The peak of the summed RSS of the descendants of ``pid`` (the launcher, not counted),
    sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop_event = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            tree, total = _children(), 0
            todo = list(tree.get(self.pid, []))
            while todo:
                pid = todo.pop()
                total += _rss(pid)
                todo += tree.get(pid, [])
            self.peak = max(self.peak, total)
            self._stop_event.wait(0.05)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def stop_leftovers(marker: str) -> int:
    """Stop (by pid) every process that still carries ``marker``; returns how many there were."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                continue
    count = len(found)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while found and time.monotonic() < deadline:
        found = [pid for pid in found if _alive(pid)]
        time.sleep(0.1)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return count


#: How many processes measured commands left behind, per tool name.
LEFTOVERS: dict[str, int] = {}


#: Runs the measured command and reports its wall time and ``wait4`` rusage. Why a launcher: on
#: Linux a child's ru_maxrss starts at its parent's high-water mark (exec records the old memory
#: map's peak, and subprocess forks with vfork), and the bench process holds the embedding model;
#: this small interpreter puts a floor of ~10 MB under the figure instead of the bench's ~1 GB.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
took = time.perf_counter() - start
print(json.dumps({"seconds": took, "maxrss_kib": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}))
"""


def measure(
    tool: Tool,
    args: list[str],
    home: Path | None = None,
    *,
    extra_env: dict[str, str] | None = None,
    keep: str = "",
    stdin: bytes | None = None,
    cwd: Path | None = None,
) -> Sample:
    """Run one command of ``tool`` to the end: wall time and peak RSS; fails loudly if it fails.

    What the command leaves running is stopped and counted, unless ``keep`` names the marker of
    processes it is expected to leave (the memory service a search starts on demand); the figure
    then stops them itself when its pairs are done.
    """
    marker = keep or uuid.uuid4().hex
    env = {**tool.env(home), **(extra_env or {}), MARKER: marker}
    with tempfile.TemporaryFile() as err:
        launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *tool.cli, *args]
        proc = subprocess.Popen(
            launcher, env=env, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.PIPE, cwd=cwd
        )
        sampler = TreeSampler(proc.pid)
        sampler.start()
        out, _ = proc.communicate(stdin or b"")
        sampler.stop()
        if not keep:
            LEFTOVERS[tool.name] = LEFTOVERS.get(tool.name, 0) + stop_leftovers(marker)
        report = json.loads(out) if proc.returncode == 0 else {"code": proc.returncode}
        if report["code"] != 0:
            err.seek(0)
            stderr = err.read().decode(errors="replace")[-3000:]
            raise BenchError(f"{tool.name}: `memsearch {' '.join(args)}` failed:\n{stderr}")
    return Sample(report["seconds"], max(report["maxrss_kib"] * 1024, sampler.peak) / 2**20)


# --- the two tools --------------------------------------------------------------------------------


@dataclass
class Tool:
    """One tool: how to run it, its own copy of the corpus and its own HOME and stores."""

    name: str
    cli: list[str]
    python: str
    provider_flags: list[str]  # ours: none (packaged default); the original: the local endpoint
    work: Path
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. ours with redaction off
    store: Path = field(init=False)

    def __post_init__(self) -> None:
        self.store = self.work / "full0.db"  # the index the rows after the full index use

    @property
    def corpus(self) -> Path:
        return self.work / "corpus"

    @property
    def memory(self) -> str:
        return str(self.corpus / "memory")

    def home(self, name: str = "main") -> Path:
        home = self.work / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        return home

    def env(self, home: Path | None = None) -> dict[str, str]:
        home = home or self.home()
        # Ours starts a memory service on demand at a search unless told not to: the rows measure
        # one process doing the work, except the on-demand row (which turns it back on).
        return {
            **os.environ,
            "HOME": str(home),
            "HF_HUB_OFFLINE": "1",
            "OPENAI_API_KEY": LOCAL_KEY,
            "MEMSEARCH_SERVICE_AUTOSTART": "0",
            **self.extra_env,
        }

    def flags(self, db: Path) -> list[str]:
        return [*self.provider_flags, "--milvus-uri", str(db)]


@dataclass
class Bench:
    """What the figures share: the tools, the queries, the endpoints, the stores, the options."""

    ours: Tool
    original: Tool
    queries: list[str]
    work: Path
    model_url: str  # /v1/embeddings with our packaged model
    hash_url: str  # /v1/embeddings with the hashing embedder (the scale row)
    args: argparse.Namespace
    servers: dict[str, str] = field(default_factory=dict)  # tool name -> its milvus-lite server URI
    ours_unredacted: Tool | None = None  # ours with MEMSEARCH_REDACT=0 (the redaction rows' baseline)
    ours_shallow: Tool | None = None  # ours with 5 candidates per leg (the ranking row's baseline)
    ours_leg: Tool | None = None  # ours with the multilingual leg on (the leg rows' measured tool)

    @property
    def tools(self) -> tuple[Tool, Tool]:
        return (self.ours, self.original)

    def pair(self, baseline: str) -> tuple[Tool, Tool]:
        """Ours and what a figure compares it with (the original, ours with redaction off, or ours
        with the old candidate depth)."""
        if baseline == "leg":  # the leg's cost: ours with it on, beside ours (off)
            assert self.ours_leg is not None
            return (self.ours_leg, self.ours)
        other = {"original": self.original, "unredacted": self.ours_unredacted, "shallow": self.ours_shallow}[
            baseline
        ]
        assert other is not None, baseline
        return (self.ours, other)


# --- the figures: one function each, (bench, tool, run number) -> Sample ---------------------------


def help_(b: Bench, t: Tool, i: int) -> Sample:
    return measure(t, ["--help"])


def full_index(b: Bench, t: Tool, i: int) -> Sample:
    """A first index into a new store, with a new HOME (no embedding cache from the run before).

    Ours records in its ``.index-state.json`` (kept in ``MEMSEARCH_DIR``) how long the run waited
    for the model: the table's note splits the time into model time and everything else."""
    if t is not b.ours:
        return measure(t, ["index", t.memory, *t.flags(t.work / f"full{i}.db")], home=t.home(f"full{i}"))
    state = t.work / f"state-full{i}"
    state.mkdir(exist_ok=True)
    sample = measure(
        t,
        ["index", t.memory, *t.flags(t.work / f"full{i}.db")],
        home=t.home(f"full{i}"),
        extra_env={"MEMSEARCH_DIR": str(state)},
    )
    record = json.loads((state / ".index-state.json").read_text(encoding="utf-8"))
    return replace(sample, model_seconds=float(record["embed_seconds"]))


def model_share(samples: list[Sample]) -> str:
    """Where ours' full index spends its time: model (median) vs the rest of the run's wall time."""
    timed = [s for s in samples if s.model_seconds is not None]
    if not timed:
        return ""
    total = statistics.median(s.seconds for s in timed)
    model = statistics.median(s.model_seconds or 0.0 for s in timed)
    return (
        f"Full index, ours: {model:.1f} s of {total:.1f} s waiting for the model ({model / total:.0%}); "
        f"the other {total - model:.1f} s are start-up, reading, chunking and the store's work "
        "not hidden behind the model (medians)."
    )


#: The detector alone over a corpus, in a fresh process of ours (what ``index`` and the exits run).
_DETECTOR = r"""
import json, pathlib, statistics, sys, time
from memsearch.detector import Detector
files = [p.read_text(encoding="utf-8") for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.md"))]
turn = sys.argv[2]
d = Detector()
def timed(texts):
    start = time.perf_counter()
    for text in texts:
        d.redact(text)
    return time.perf_counter() - start
print(json.dumps({"corpus": statistics.median(timed(files) for _ in range(3)),
                  "turn": statistics.median(timed([turn]) for _ in range(20)),
                  "mb": sum(len(t.encode()) for t in files) / 2**20}))
"""


def redaction_share(b: Bench, measured: dict[Figure, dict[str, list[Sample]]]) -> str:
    """What the detector alone costs beside what it is part of: the whole corpus (what a full index
    redacts) against ours' full index, one captured turn against a capture (medians). The target is
    issue 37's: under 5 % of each."""
    proc = subprocess.run(
        [b.ours.python, "-c", _DETECTOR, str(b.ours.corpus), _TURN_TEXT + _TURN_SECRETS + _TURN_TEXT],
        check=True,
        capture_output=True,
        text=True,
    )
    d = json.loads(proc.stdout)
    parts = [
        f"Redaction alone (memsearch.detector, in-process): {d['corpus']:.2f} s for the corpus "
        f"({d['mb']:.1f} MB, {d['mb'] / max(d['corpus'], 1e-9):.1f} MB/s), "
        f"{d['turn'] * 1000:.1f} ms for one turn"
    ]
    for figure, what, key in ((FULL_REDACT, "full index", "corpus"), (CAPTURE_REDACT, "capture", "turn")):
        if figure in measured and measured[figure].get("ours"):
            whole = statistics.median(s.seconds for s in measured[figure]["ours"])
            share = d[key] / whole
            verdict = "met" if share < 0.05 else "MISSED"
            parts.append(f"{share:.1%} of a {what} ({whole:.2f} s; target < 5 %: {verdict})")
    return "; ".join(parts) + "."


def noop_reindex(b: Bench, t: Tool, i: int) -> Sample:
    return measure(t, ["index", t.memory, *t.flags(t.store)], home=t.home("full0"))


def one_changed_file(b: Bench, t: Tool, i: int) -> Sample:
    """One bullet edited and one turn appended in one journal (each tool edits its own copy)."""
    subprocess.run([sys.executable, str(GEN), str(t.corpus), "--edit-one"], check=True, capture_output=True)
    return measure(t, ["index", t.memory, *t.flags(t.store)], home=t.home("full0"))


def cli_search(b: Bench, t: Tool, i: int) -> Sample:
    """``search`` from the CLI; a different query each run, the same one for both tools of a pair."""
    query = b.queries[i % len(b.queries)]
    return measure(t, ["search", query, "--top-k", "5", *t.flags(t.store)], home=t.home("full0"))


#: The marker of the memory service ours starts on demand in :func:`cli_search_on_demand`.
ON_DEMAND = "on-demand-service"


def cli_search_on_demand(b: Bench, t: Tool, i: int) -> Sample:
    """``search`` from the CLI as a user gets it with nothing started by hand: ours starts the
    memory service on demand at the first search (that run pays the start), and every later search
    within the idle period is answered by it; the original has no service (its plain CLI search)."""
    query = b.queries[(i + 1) % len(b.queries)]
    return measure(
        t,
        ["search", query, "--top-k", "5", *t.flags(t.store)],
        home=t.home("full0"),
        extra_env={"MEMSEARCH_SERVICE_AUTOSTART": "1"},
        keep=ON_DEMAND,
    )


@contextlib.contextmanager
def stop_on_demand(b: Bench) -> Iterator[None]:
    """Before the pairs, no service may run for the store; after them, stop the one they started."""
    stop_leftovers(ON_DEMAND)
    try:
        yield
    finally:
        stop_leftovers(ON_DEMAND)


def cli_search_service(b: Bench, t: Tool, i: int) -> Sample:
    """Ours while another process owns the store (the figure's ``during``: ``memsearch serve``, or a
    program holding ``MemSearch``), so each search is its client; the original cannot share a
    store, so its figure is its plain CLI search."""
    return cli_search(b, t, len(b.queries) - 1 - i)


#: A turn as Claude Code records it: a question, then an answer carrying what agents paste (a key,
#: a token, a connection string, an .env line) among ordinary text, for the capture figure.
#: (Joined at run time, so this file holds no secret-shaped text for `memsearch scan` to find.)
_TURN_SECRETS = "".join(
    [
        "OPENAI_API_KEY=sk", "-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9oPq\n",
        "token ghp", "_Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4",
        " and postgres://app:", "s3cr3t-pw", "@db.internal/prod\n",
    ]
)  # fmt: skip
_TURN_TEXT = "The export job retries three times with a 2 s backoff, then marks the batch failed. " * 40


def capture_turn(t: Tool, i: int) -> tuple[Path, bytes]:
    """A project with one recorded turn, and the Stop hook's stdin for it (fresh for every run)."""
    project = t.work / f"capture{i}"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    session = f"bench-{uuid.uuid4()}"
    messages = [
        ("user", "How does the export job handle failures? My config:\n" + _TURN_SECRETS),
        ("assistant", _TURN_TEXT + "\n" + _TURN_SECRETS + _TURN_TEXT),
    ]
    lines = [
        {
            "type": role,
            "sessionId": session,
            "uuid": str(uuid.uuid4()),
            "cwd": str(project),
            "timestamp": f"2026-12-01T10:00:0{n}.000Z",
            "message": {"role": role, "content": text},
        }
        for n, (role, text) in enumerate(messages)
    ]
    transcript = project / f"{session}.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stdin = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    return project, json.dumps(stdin).encode()


def capture(b: Bench, t: Tool, i: int) -> Sample:
    """One Claude Code turn captured by the Stop hook in its own process (``MEMSEARCH_HOOK_SYNC``):
    read the turn, redact it, summarise (no ``claude`` on the PATH: the plain extract), append to the
    journal, index it. Ours with redaction beside ours without (the original has no redaction)."""
    project, stdin = capture_turn(t, i)
    env = {"MEMSEARCH_HOOK_SYNC": "1", "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    sample = measure(
        t,
        ["hook", "claude-code", "stop"],
        home=t.home(f"capture{i}"),
        extra_env=env,
        stdin=stdin,
        cwd=project,
    )
    journals = list((project / ".memsearch" / "memory").glob("*.md"))
    if not journals:
        raise BenchError(f"{t.name}: the Stop hook wrote no journal in {project}")
    # Each side did what it is measured for: the key redacted with redaction on, kept with it off.
    kept = _TURN_SECRETS.split("=", 1)[1][:24] in journals[0].read_text()
    if kept != (t.extra_env.get("MEMSEARCH_REDACT") == "0"):
        raise BenchError(
            f"{t.name}: the journal {'holds' if kept else 'lacks'} the turn's key: {journals[0]}"
        )
    return sample


#: In-process ``MemSearch`` with the openai provider: ``build`` indexes a store (not timed),
#: ``search`` opens it, searches once to warm up, then times every query ``passes`` times. The
#: same script runs under both tools' interpreters: both constructors take these arguments.
_INPROCESS = r"""
import asyncio, json, os, statistics, sys, time
from memsearch import MemSearch

mode, memory, uri, base_url, model = sys.argv[1:6]
queries, passes = json.loads(sys.argv[6]), int(sys.argv[7])
# ours with another candidate depth (the ranking row): a setting only ours has
depth = os.environ.get("BENCH_CANDIDATES")
extra = {"search_candidates": int(depth)} if depth else {}
if os.environ.get("BENCH_MULTILINGUAL"):  # ours with the multilingual leg on (the leg rows)
    extra["multilingual"] = True

async def main():
    ms = MemSearch([memory], embedding_provider="openai", embedding_model=model,
                   embedding_base_url=base_url, embedding_api_key=os.environ["OPENAI_API_KEY"],
                   milvus_uri=uri, **extra)
    try:
        if mode == "build":
            return {"chunks": await ms.index()}
        await ms.search(queries[0], top_k=5)
        took = []
        for query in queries * passes:
            start = time.perf_counter()
            await ms.search(query, top_k=5)
            took.append(time.perf_counter() - start)
        return {"p50_s": statistics.median(took), "searches": len(took)}
    finally:
        ms.close()

print(json.dumps(asyncio.run(main())))
"""


def inprocess(
    t: Tool, mode: str, memory: Path, db: Path | str, url: str, queries: list[str]
) -> dict[str, Any]:
    """Run :data:`_INPROCESS` with ``t``'s interpreter on ``db`` (a Lite path or a server URI);
    its JSON answer."""
    args = [mode, str(memory / "memory"), str(db), url, MODEL, json.dumps(queries), "3"]
    proc = subprocess.run(
        [t.python, "-c", _INPROCESS, *args], env=t.env(t.home("inprocess")), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise BenchError(f"{t.name}: in-process {mode} failed:\n{proc.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer


def inprocess_search(b: Bench, t: Tool, i: int) -> Sample:
    """p50 of ``MemSearch.search`` in one process, openai provider on the model endpoint."""
    answer = inprocess(t, "search", b.work / "corpus-small", t.work / "small.db", b.model_url, b.queries)
    return Sample(answer["p50_s"])


def inprocess_search_scale(b: Bench, t: Tool, i: int) -> Sample:
    """The same at ``--scale`` chunks, the queries embedded by the hashing endpoint."""
    answer = inprocess(t, "search", b.work / "corpus-scale", t.work / "scale.db", b.hash_url, b.queries)
    return Sample(answer["p50_s"])


def inprocess_search_scale_server(b: Bench, t: Tool, i: int) -> Sample:
    """The same, the store on a ``milvus-lite server`` URI (see :func:`scale_servers`)."""
    memory = b.work / "corpus-scale"
    answer = inprocess(t, "search", memory, b.servers[t.name], b.hash_url, b.queries)
    return Sample(answer["p50_s"])


# --- what a figure needs before and while it runs -------------------------------------------------


def leg_small_store(b: Bench) -> str:
    """Ours with the multilingual leg on indexes ``--small-chunks`` (its own copy, its second
    vectors made by the multilingual model), once; ours (off) uses :func:`small_stores`'."""
    note = small_stores(b)
    leg = b.ours_leg
    assert leg is not None
    if (leg.work / "small.db").exists():
        return note
    started = time.perf_counter()
    answer = inprocess(leg, "build", b.work / "corpus-small", leg.work / "small.db", b.model_url, b.queries)
    took = f"{leg.name} {answer['chunks']:,} chunks in {time.perf_counter() - started:.0f} s"
    return f"{note}; built {took}" if note else f"built {took}"


def main_stores(b: Bench) -> str:
    """The store the rows after the full index use: run 0 of the full index, or (``--only``
    without ``full``) one full index per tool now, outside the table."""
    missing = [t for t in b.tools if not t.store.exists()]
    for t in missing:
        full_index(b, t, 0)
    return f"indexed the main corpus for {', '.join(t.name for t in missing)}" if missing else ""


def small_stores(b: Bench) -> str:
    """Both tools index ``--small-chunks`` through the model endpoint (not a figure), once for the
    rows that share them."""
    if (b.work / "corpus-small").exists():
        return ""
    gen(b.work / "corpus-small", b.args.small_chunks)
    return build_stores(b, b.work / "corpus-small", "small.db", b.model_url)


def scale_stores(b: Bench) -> str:
    """Both tools index ``--scale`` chunks through the hashing endpoint: the model would take most
    of an hour per tool, and this row measures the store at scale, not the model."""
    return build_stores(b, scale_corpus(b), "scale.db", b.hash_url)


def scale_corpus(b: Bench) -> Path:
    """The ``--scale`` corpus (generated once per run, for the scale rows that need it)."""
    corpus = b.work / "corpus-scale"
    if not corpus.exists():
        gen(corpus, b.args.scale)
    return corpus


def build_stores(b: Bench, corpus: Path, db_name: str, url: str) -> str:
    took = []
    for t in b.tools:
        start = time.perf_counter()
        answer = inprocess(t, "build", corpus, t.work / db_name, url, b.queries)
        took.append(f"{t.name} {answer['chunks']:,} chunks in {time.perf_counter() - start:.0f} s")
    return "built " + ", ".join(took)


def milvus_lite_executable() -> str:
    """The ``milvus-lite`` console script next to this interpreter (both tools' servers use it)."""
    found = Path(sys.executable).with_name("milvus-lite")
    if not found.exists():
        raise BenchError(f"milvus-lite not found next to {sys.executable}")
    return str(found)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def scale_servers(b: Bench) -> Iterator[None]:
    """One ``milvus-lite server`` per tool (its own port and data folder, so both keep the default
    collection name) holding the ``--scale`` corpus, indexed through the hashing endpoint; stopped
    when the pairs are done. The same engine as the Lite file, behind gRPC in its own process."""
    corpus = scale_corpus(b)
    procs = []
    try:
        for t in b.tools:
            port = _free_port()
            command = [milvus_lite_executable(), "server", "--data-dir", str(t.work / "server-data")]
            command += ["--host", "127.0.0.1", "--port", str(port)]
            procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            b.servers[t.name] = f"http://127.0.0.1:{port}"
        for t, proc in zip(b.tools, procs, strict=True):
            _wait_for_port(int(b.servers[t.name].rsplit(":", 1)[1]), proc)
        for t in b.tools:  # each tool indexes into its own server (not timed)
            start = time.perf_counter()
            answer = inprocess(t, "build", corpus, b.servers[t.name], b.hash_url, b.queries)
            took = time.perf_counter() - start
            log(f"built the server collection of {t.name}: {answer['chunks']:,} chunks in {took:.0f} s")
        yield
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"milvus-lite server on port {port} did not start")
        time.sleep(0.2)


def ours_serving(b: Bench) -> contextlib.AbstractContextManager[None]:
    """``memsearch serve`` (ours) on ours' store until the block ends; waits until it is ready."""
    return serving(b, b.ours.store, "full0")


def ours_serving_small(b: Bench) -> contextlib.AbstractContextManager[None]:
    """The same on the in-process rows' store: ours' ``MemSearch`` is then the service's client."""
    return serving(b, b.ours.work / "small.db", "inprocess")


@contextlib.contextmanager
def serving(b: Bench, store: Path, home: str) -> Iterator[None]:
    t = b.ours
    env = {**t.env(t.home(home)), MARKER: "serve"}
    proc = subprocess.Popen(
        [*t.cli, "serve", *t.flags(store)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ping = (
        "from memsearch.service.client import ServiceClient\n"
        "from memsearch.service.paths import service_paths\n"
        f"print(ServiceClient(service_paths({str(store)!r})).ping().get('ready'))\n"
    )
    try:
        deadline = time.monotonic() + 180
        while (
            subprocess.run([t.python, "-c", ping], env=env, capture_output=True, text=True).stdout.strip()
            != "True"
        ):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError("ours: `memsearch serve` did not become ready")
            time.sleep(0.5)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


#: A program that holds ours' store with a ``MemSearch`` (it searches once to own it warm) until its
#: stdin closes: the CLI searches of the ``program-owner`` row are its clients.
_PROGRAM = r"""
import asyncio, sys
from memsearch import MemSearch

memory, uri = sys.argv[1:3]
with MemSearch([memory], milvus_uri=uri) as ms:
    asyncio.run(ms.search("warm-up", top_k=1))
    print("ready", flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def program_owning(b: Bench) -> Iterator[None]:
    """A Python program holding ours' store (see :data:`_PROGRAM`) until the block ends."""
    t = b.ours
    env = {**t.env(t.home("full0")), MARKER: "program"}
    proc = subprocess.Popen(
        [t.python, "-c", _PROGRAM, t.memory, str(t.store)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise BenchError("ours: the program holding the store did not start")
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


# --- the table ------------------------------------------------------------------------------------


@dataclass(eq=False)  # compared by identity: rows that read one figure share its runs
class Figure:
    run: Callable[[Bench, Tool, int], Sample]
    unit: str = "s"
    repeat: str = "repeat"  # the option giving the number of pairs
    prepare: Callable[[Bench], str] | None = None  # before the pairs; returns a note for the log
    during: Callable[[Bench], contextlib.AbstractContextManager[None]] | None = None
    baseline: str = "original"  # or "unredacted" (ours, MEMSEARCH_REDACT=0), "shallow" (ours, 5 candidates)


HELP = Figure(help_)
FULL = Figure(full_index, repeat="full_repeat")
NOOP = Figure(noop_reindex, prepare=main_stores)
CHANGED = Figure(one_changed_file, prepare=main_stores)
SEARCH = Figure(cli_search, prepare=main_stores)
SEARCH_ON_DEMAND = Figure(cli_search_on_demand, prepare=main_stores, during=stop_on_demand)
SEARCH_SERVICE = Figure(cli_search_service, prepare=main_stores, during=ours_serving)
INPROCESS = Figure(inprocess_search, unit="ms", prepare=small_stores)
SEARCH_PROGRAM = Figure(cli_search_service, prepare=main_stores, during=program_owning)
INPROCESS_CLIENT = Figure(inprocess_search, unit="ms", prepare=small_stores, during=ours_serving_small)
SCALE = Figure(inprocess_search_scale, unit="ms", prepare=scale_stores)
SCALE_SERVER = Figure(inprocess_search_scale_server, unit="ms", during=scale_servers)
INPROCESS_SHALLOW = Figure(inprocess_search, unit="ms", prepare=small_stores, baseline="shallow")
FULL_REDACT = Figure(full_index, repeat="full_repeat", baseline="unredacted")
FULL_LEG = Figure(full_index, repeat="full_repeat", baseline="leg")
INPROCESS_LEG = Figure(inprocess_search, unit="ms", prepare=leg_small_store, baseline="leg")
CAPTURE_REDACT = Figure(capture, baseline="unredacted")


@dataclass
class Row:
    key: str  # for --only
    name: str
    figure: Figure
    target: float = 1.0
    strict: bool = True  # ratio < target (times) or ≤ target (memory and the issue's ≤ rows)
    rss: bool = False  # the peak RSS of the figure's runs, not their time


ROWS = [
    Row("help", "`--help`", HELP),
    Row("full", "full index, {chunks:,} chunks", FULL),
    Row("noop", "no-op re-index", NOOP),
    Row("changed", "one changed file", CHANGED),
    Row(
        "search",
        "CLI `search`, no service (ours: autostart off, every search opens the store)",
        SEARCH,
        target=0.5,
        strict=False,
    ),
    Row(
        "ondemand",
        "CLI `search`, no service started by hand (ours: the first search starts one on demand)",
        SEARCH_ON_DEMAND,
        target=0.5,
        strict=False,
    ),
    Row("service", "search with the memory service running (original: its plain CLI search)", SEARCH_SERVICE),
    Row(
        "program-owner",
        "CLI `search` while a program holding `MemSearch` owns the store (original: its plain CLI search)",
        SEARCH_PROGRAM,
    ),
    Row("rss-full", "peak RSS, full index", FULL, strict=False, rss=True),
    Row("rss-search", "peak RSS, CLI search (no service)", SEARCH, strict=False, rss=True),
    Row("rss-changed", "peak RSS, one changed file", CHANGED, strict=False, rss=True),
    Row(
        "inprocess",
        "in-process `MemSearch.search` p50, openai provider, {small:,} chunks",
        INPROCESS,
        strict=False,
    ),
    Row(
        "inprocess-client",
        "in-process `MemSearch.search` p50 while a `memsearch serve` owns the store "
        "(ours: a client of it; original: alone, it cannot share a store)",
        INPROCESS_CLIENT,
        target=2.0,
        strict=False,
    ),
]
#: What redaction (on by default, docs/security.md) costs: ours beside ours with MEMSEARCH_REDACT=0.
#: The target is the privacy issue's: under 5 % of capture time and of index time.
REDACTION_ROWS = [
    Row("redact-full", "full index, {chunks:,} chunks", FULL_REDACT, target=1.05, strict=False),
    Row(
        "redact-capture",
        "capture of one turn (Stop hook: redact, extract, journal, index)",
        CAPTURE_REDACT,
        target=1.05,
        strict=False,
    ),
]
#: What ranking once costs (issue 36): ours with each leg fetching search.candidates (30) hits
#: beside ours fetching 5, what a search for 5 results fetched per leg before. Same store, same
#: queries, in alternation; the target is the issue's: at most 15 % more.
RANKING_ROWS = [
    Row(
        "depth",
        "in-process `MemSearch.search` p50, top 5, {small:,} chunks",
        INPROCESS_SHALLOW,
        target=1.15,
        strict=False,
    ),
]
#: What the multilingual leg costs (issue 39): ours with ``--multilingual`` (its second vectors
#: made by the multilingual model, searched as a third leg) beside ours without, in alternation.
#: The issue's targets: full index time at most +35 %, peak RSS at most +150 MB (a ratio of 1.3
#: at the ~500 MB ours peaks at), search p50 at most +10 ms (1.3 at the ~35 ms it takes here).
LEG_ROWS = [
    Row("leg-full", "full index, {chunks:,} chunks", FULL_LEG, target=1.35, strict=False),
    Row("leg-rss-full", "peak RSS, full index (target: +150 MB)", FULL_LEG, 1.3, False, rss=True),
    Row(
        "leg-search",
        "in-process `MemSearch.search` p50, {small:,} chunks (target: +10 ms)",
        INPROCESS_LEG,
        target=1.3,
        strict=False,
    ),
]
SCALE_ROW = Row(
    "scale", "in-process `MemSearch.search` p50 at {scale:,} chunks (hashing endpoint)", SCALE, 0.5, False
)
#: The same corpus on a Milvus-protocol server (``milvus-lite server``): what moving to a server URI
#: costs or buys (docs/scaling.md). Ours asks the two legs and fuses them itself; the original asks
#: one hybrid search.
SCALE_SERVER_ROW = Row(
    "scale-server",
    "in-process `MemSearch.search` p50 at {scale:,} chunks on a `milvus-lite server` URI",
    SCALE_SERVER,
    1.0,
    False,
)
#: The rows ``--scale`` adds.
SCALE_ROWS = [SCALE_ROW, SCALE_SERVER_ROW]


def pairs(b: Bench, figure: Figure) -> dict[str, list[Sample]]:
    """``figure`` for ours then the original, in alternation, as many times as its option says."""
    note = figure.prepare(b) if figure.prepare else ""
    if note:
        log(note)
    tools = b.pair(figure.baseline)
    out: dict[str, list[Sample]] = {t.name: [] for t in tools}
    with figure.during(b) if figure.during else contextlib.nullcontext():
        for i in range(getattr(b.args, figure.repeat)):
            for t in tools:
                out[t.name].append(figure.run(b, t, i))
    return out


def fmt(value: float, unit: str) -> str:
    if unit == "MB":
        return f"{value:.0f} MB"
    if unit == "ms":
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def table_line(b: Bench, row: Row, samples: dict[str, list[Sample]]) -> str:
    """One row of the table: medians, their ratio, the target and the verdict."""
    unit = "MB" if row.rss else row.figure.unit
    values = [[s.rss_mb if row.rss else s.seconds for s in runs] for runs in samples.values()]
    ours, original = statistics.median(values[0]), statistics.median(values[1])
    ratio = ours / original
    verdict = "✔" if (ratio < row.target if row.strict else ratio <= row.target) else "✘"
    name = row.name.format(chunks=b.args.chunks, small=b.args.small_chunks, scale=b.args.scale)
    cells = [name, fmt(original, unit), fmt(ours, unit), f"{ratio:.2f}"]
    cells += [f"{'<' if row.strict else '≤'} {row.target:g}", verdict, str(len(values[0]))]
    return "| " + " | ".join(cells) + " |"


# --- setup and the run ----------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def gen(out: Path, chunks: int) -> None:
    """The generator's corpus of ``chunks`` turns in ``out`` (~33 per daily file, as its defaults)."""
    files = max(2, chunks // 33)
    cmd = [sys.executable, str(GEN), str(out), "--chunks", str(chunks), "--files", str(files)]
    subprocess.run(cmd, check=True, capture_output=True)


def compile_package() -> None:
    """Byte-compile our package, as ``pip install`` does (the original's install already did).

    An editable checkout run with PYTHONDONTWRITEBYTECODE=1 (as on this machine) would otherwise
    recompile every module in every measured process.
    """
    import memsearch

    package = Path(memsearch.__file__).resolve().parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, capture_output=True)


def versions(python: str) -> str:
    """``memsearch X (milvus-lite Y), Python Z`` of one interpreter."""
    code = (
        "import importlib.metadata as m, platform\n"
        "print(f\"memsearch {m.version('memsearch')} (milvus-lite {m.version('milvus-lite')}), \"\n"
        '      f"Python {platform.python_version()}")'
    )
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def machine(b: Bench) -> str:
    """CPU, RAM, load, and both tools' versions, for the table's heading."""
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    ram = int(mem.split()[1]) / 2**20
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {ram:.0f} GiB RAM, {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.1f} at the start\n"
        f"ours: {versions(b.ours.python)}; original: {versions(b.original.python)}"
    )


def selected(args: argparse.Namespace) -> list[Row]:
    rows = ROWS + REDACTION_ROWS + RANKING_ROWS + LEG_ROWS + (SCALE_ROWS if args.scale else [])
    if args.only:
        keys = set(args.only.split(","))
        if unknown := keys - {row.key for row in rows} - {console_bench.KEY}:
            raise BenchError(
                f"--only: no row {', '.join(sorted(unknown))} (rows: {', '.join(r.key for r in rows)})"
            )
        rows = [row for row in rows if row.key in keys]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="pairs per figure (default 5)")
    parser.add_argument("--full-repeat", type=int, default=3, help="pairs of full index runs (default 3)")
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of the main corpus (default 2000)")
    parser.add_argument("--small-chunks", type=int, default=300, help="chunks of the in-process store (300)")
    parser.add_argument(
        "--scale", type=int, default=0, help="add the in-process rows (Lite file, server) at this many chunks"
    )
    parser.add_argument(
        "--only",
        default="",
        help="only these rows, comma-separated: "
        + ", ".join(
            [
                *(r.key for r in [*ROWS, *REDACTION_ROWS, *RANKING_ROWS, *LEG_ROWS, *SCALE_ROWS]),
                console_bench.KEY,
            ]
        ),
    )
    parser.add_argument(
        "--purge",
        default="1000,10000",
        help="store sizes for the cost of forget's rewrite of Milvus Lite's files "
        "(evaluation/purge_cost.py); '' for none",
    )
    parser.add_argument("--work", type=Path, default=None, help="work folder, emptied first (default: new)")
    args = parser.parse_args(argv)
    rows = selected(args)  # an unknown --only fails before any setup
    console = not args.only or console_bench.KEY in args.only.split(",")
    if not rows:  # only the console's row: neither tool's corpus nor the original is needed
        work = args.work or Path(tempfile.mkdtemp(prefix="memsearch-bench-"))
        shutil.rmtree(work, ignore_errors=True)
        print("The memory console (`memsearch ui`): ours alone, the original has none\n")
        print(console_bench.table(work, args.repeat))
        return

    started = time.monotonic()
    compile_package()
    work = args.work or Path(tempfile.mkdtemp(prefix="memsearch-bench-"))
    shutil.rmtree(work, ignore_errors=True)
    gen(work / "corpus", args.chunks)
    listing = subprocess.run(
        [sys.executable, str(GEN), str(work / "corpus"), "--queries"],
        check=True,
        capture_output=True,
        text=True,
    )
    queries = [q for q in listing.stdout.splitlines() if q.strip()]
    ours = Tool("ours", [sys.executable, "-m", "memsearch"], sys.executable, [], work / "ours")
    original = Tool("original", [str(original_cli())], str(original_python()), [], work / "original")
    unredacted = Tool(
        "ours, redaction off", ours.cli, ours.python, [], work / "ours-unredacted", {"MEMSEARCH_REDACT": "0"}
    )
    # the same work folder (stores, corpus) as ours: only the candidate depth differs
    shallow = Tool("ours, 5 candidates", ours.cli, ours.python, [], ours.work, {"BENCH_CANDIDATES": "5"})
    leg = Tool(
        "ours, multilingual leg",
        ours.cli,
        ours.python,
        ["--multilingual"],
        work / "ours-leg",
        {"BENCH_MULTILINGUAL": "1"},
    )
    for t in (ours, original, unredacted, leg):
        shutil.copytree(work / "corpus", t.corpus)

    with serving_packaged_model() as model_url, serving_hashed_vectors() as hash_url:
        original.provider_flags = ["--provider", "openai", "--model", MODEL, "--base-url", model_url]
        b = Bench(
            ours,
            original,
            queries,
            work,
            model_url,
            hash_url,
            args,
            ours_unredacted=unredacted,
            ours_shallow=shallow,
            ours_leg=leg,
        )
        heading = machine(b)
        log(heading.replace("\n", "\n  "))
        measured: dict[Figure, dict[str, list[Sample]]] = {}
        lines = []
        for row in rows:
            if row.figure not in measured:
                measured[row.figure] = pairs(b, row.figure)
            lines.append(table_line(b, row, measured[row.figure]))
            log(lines[-1])

    console_table = console_bench.table(work, args.repeat) if console else ""
    minutes = (time.monotonic() - started) / 60
    print(f"\n{heading}")
    print(f"medians of N pairs run in alternation (ours, then the original); {minutes:.1f} min in all\n")
    redaction = [line for row, line in zip(rows, lines, strict=True) if row in REDACTION_ROWS]
    ranking = [line for row, line in zip(rows, lines, strict=True) if row in RANKING_ROWS]
    legs = [line for row, line in zip(rows, lines, strict=True) if row in LEG_ROWS]
    others = [*REDACTION_ROWS, *RANKING_ROWS, *LEG_ROWS]
    if main_lines := [line for row, line in zip(rows, lines, strict=True) if row not in others]:
        print("| figure | original | ours | ours / original | target | verdict | N |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(main_lines))
    if redaction:
        print("\nWhat redaction costs: ours beside ours with MEMSEARCH_REDACT=0, in alternation\n")
        print("| figure | redaction off | redaction on | on / off | target | verdict | N |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(redaction))
        print("\n" + redaction_share(b, measured))
    if console_table:
        print("\nThe memory console (`memsearch ui`): ours alone, the original has none\n")
        print(console_table)
    if ranking:
        print("\nWhat ranking once costs: ours (30 candidates per leg) beside ours with 5, in alternation\n")
        print("| figure | 5 candidates | 30 candidates | 30 / 5 | target | verdict | N |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(ranking))
    if legs:
        print("\nWhat the multilingual leg costs: ours with --multilingual beside ours, in alternation\n")
        print("| figure | leg off | leg on | on / off | target | verdict | N |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(legs))
    if FULL in measured:
        print("\n" + model_share(measured[FULL]["ours"]))
    if sizes := [int(n) for n in args.purge.split(",") if n.strip()]:
        from evaluation.purge_cost import measure as purge_cost
        from evaluation.purge_cost import table as purge_table

        print(
            "\nWhat forget's rewrite of Milvus Lite's files costs (ours only: the original never does it)\n"
        )
        print(purge_table([purge_cost(n, args.repeat) for n in sizes]))
    print(
        "\nPeak RSS: the larger of wait4's ru_maxrss (largest process) and the summed RSS of the "
        "process tree sampled every 50 ms. Processes left behind by measured commands (stopped "
        f"after each): ours {LEFTOVERS.get('ours', 0)}, original {LEFTOVERS.get('original', 0)}."
    )


if __name__ == "__main__":
    main()
