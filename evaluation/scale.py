"""How memsearch's costs grow with the memory (``make bench-scale``): 10,000 to 100,000 chunks.

For each size (``--sizes``, default 10,000, 30,000 and 100,000 chunks; ``evaluation/scale_corpus``:
three years of several projects' journals plus notes, one file per ~10 chunks, so 10,000 files at
the top) the bench measures searching (in-process, through the memory service, with 16 client
processes at once), indexing (nothing changed, one file changed), ``watch``, a window of days, the
service's start-up and memory, the store's size on disk, and ``stats``, ``recent`` and ``forget``:
ours, and the original 0.4.23 beside it wherever it has the operation and can run it (one run of
each, medians; the ratio is ours / original). The stores are built once and cached
(``evaluation/scale_setup``); their vectors are hashes, the queries and new chunks the real model's.

It prints one table per size, and with ``--update-readme`` writes them into evaluation/README.md
between the ``scale-tables`` markers, with the date, the machine and its load.

    python -m evaluation.scale                       # every size (the first run builds the stores)
    python -m evaluation.scale --sizes 10000 --no-original
    python -m evaluation.scale --only search,index --sizes 100000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: find the package
    sys.path.insert(0, str(ROOT))

from evaluation.gen_corpus import QUERIES  # noqa: E402
from evaluation.original import serving_hashed_vectors, serving_packaged_model  # noqa: E402
from evaluation.scale_run import (  # noqa: E402
    Watch,
    append_turn,
    cli_searches,
    counted,
    log,
    median,
    pct,
    rss_mb,
    run,
    search_kwargs,
    searchers,
    serving,
)
from evaluation.scale_setup import Size, Tool, prepare  # noqa: E402

SIZES = (10_000, 30_000, 100_000)
README = ROOT / "evaluation" / "README.md"
START, END = "<!-- scale-tables:start -->", "<!-- scale-tables:end -->"
#: Client processes searching at once in the concurrent rows (``--clients``).
CLIENTS = 16
#: The watch rows' debounce: the edit's latency is then the indexing, not the wait for quiet.
DEBOUNCE_MS = 100
#: Seconds a watch has to say it indexed an edit (``--edit-timeout``; one file: the original's first
#: edit after its start fails ~40 s later, "Event loop is closed"; the bench counts it and goes on).
EDIT_TIMEOUT = 60.0


@dataclass
class Figure:
    """One line of a size's table."""

    name: str
    unit: str  # "ms", "s", "MB", or "" for a count
    ours: float
    original: float | None = None
    #: What the original's cell says instead of a figure (it has no such operation, or fails).
    original_text: str = ""
    #: An absolute target for ours ("≤ 150 ms"), checked by ``limit``; the ratio target is ≤ 0.5.
    target: str = ""
    limit: float | None = None
    #: Said after the original's figure (e.g. how many of its runs failed).
    original_note: str = ""
    #: Whether the issue's ratio target (ours ≤ 0.5× the original) applies: not to the store's size
    #: on disk, which is the original's format by design (the same schema and files).
    halve: bool = True

    def cells(self) -> list[str]:
        ours, ratio, checks = fmt(self.ours, self.unit), "", []
        if self.original is not None and self.unit:
            ratio = f"{self.ours / self.original:.2f}" if self.original else "—"
            if self.halve:
                checks.append(self.original > 0 and self.ours / self.original <= 0.5)
        if self.limit is not None:
            checks.append(self.ours <= self.limit)
        halved = "≤ 0.5×" if ratio and ratio != "—" and self.halve else ""
        target = " and ".join(filter(None, [self.target, halved]))
        verdict = "" if not checks else ("✔" if all(checks) else "✘")
        original = fmt(self.original, self.unit) if self.original is not None else self.original_text or "—"
        original += f" ({self.original_note})" if self.original_note else ""
        return [self.name, original, ours, ratio, target, verdict]


def fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value * 1000:.0f} ms" if value >= 0.1 else f"{value * 1000:.1f} ms"
    if unit == "s":
        return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"
    if unit == "MB":
        return f"{value:.0f} MB" if value >= 10 else f"{value:.1f} MB"
    return f"{value:,.0f}"


@dataclass
class Bench:
    size: Size
    model_url: str
    args: argparse.Namespace
    figures: list[Figure]

    @property
    def ours(self) -> Tool:
        return self.size.ours

    @property
    def original(self) -> Tool | None:
        return self.size.original

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        log(" | ".join(figure.cells()))

    @staticmethod
    def journal(tool: Tool) -> Path:
        """The journal the edit rows change in ``tool``'s corpus: the first project's middle one."""
        journals = sorted((tool.corpus / "memory" / "p00").glob("*.md"))
        return journals[len(journals) // 2]


# --- the rows -------------------------------------------------------------------------------------


def disk(b: Bench) -> None:
    """Disk use per 1,000 chunks: each store's folder, after its build."""
    sizes = {t.name: _du(t.db) / (b.size.chunks / 1000) for t in b.size.tools}
    b.add(
        Figure(
            "disk per 1,000 chunks (the same files)", "MB", sizes["ours"], sizes.get("original"), halve=False
        )
    )


def _du(path: Path) -> float:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return total / 2**20


def noop(b: Bench) -> None:
    """``memsearch index`` of the whole corpus with nothing changed (a fresh process, no service)."""
    tools = b.size.tools
    times = {t.name: median([run(t, "index", str(t.corpus))[0] for _ in range(b.args.repeat)]) for t in tools}
    counts = {t.name: counted(t, "index", str(t.corpus)) for t in tools}
    _index_figures(b, "no-op re-index", times, counts)


def _index_figures(b: Bench, what: str, times: dict[str, float], counts: dict[str, dict[str, int]]) -> None:
    original = "original" in times
    b.add(Figure(f"{what}: time", "s", times["ours"], times.get("original")))
    for key, label in (
        ("stats", "markdown files stat'ed"),
        ("opens", "markdown files opened"),
        ("rows", "rows read from the store"),
    ):
        b.add(
            Figure(f"{what}: {label}", "", counts["ours"][key], counts["original"][key] if original else None)
        )


def search_inprocess(b: Bench) -> None:
    """``MemSearch.search`` in one process that opens the store itself (no service runs)."""
    for t in b.size.tools:
        got = searchers(t, search_kwargs(t, b.model_url), QUERIES, passes=3)
        if got["failures"]:
            raise SystemExit(f"{t.name}: in-process search failed: {got['first_failure']}")
        b.inprocess = getattr(b, "inprocess", {})  # type: ignore[attr-defined]
        b.inprocess[t.name] = got  # type: ignore[attr-defined]
    ours, orig = b.inprocess["ours"], b.inprocess.get("original")  # type: ignore[attr-defined]
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        b.add(
            Figure(
                f"search {label}, in-process `MemSearch`",
                "ms",
                pct(ours["took"], q),
                pct(orig["took"], q) if orig else None,
            )
        )


def with_service(b: Bench) -> None:
    """Everything measured while ours' ``memsearch serve`` owns the store."""
    ours = b.ours
    with serving(ours) as service:
        cold = None
        if b.original:  # its nearest thing: a process that opens the store and answers one search
            cold = median(
                [run(b.original, "search", QUERIES[i], "--top-k", "5")[0] for i in range(b.args.repeat)]
            )
        b.add(
            Figure(
                "service start-up on the existing store (original: a cold CLI search)",
                "s",
                service["ready_s"],
                cold,
            )
        )
        got = searchers(ours, search_kwargs(ours, b.model_url), QUERIES, passes=3)
        orig = getattr(b, "inprocess", {}).get("original")
        for q, label in ((0.5, "p50"), (0.95, "p95")):
            b.add(
                Figure(
                    f"search {label} through the service (original: in-process, alone)",
                    "ms",
                    pct(got["took"], q),
                    pct(orig["took"], q) if orig else None,
                )
            )
        many = searchers(ours, search_kwargs(ours, b.model_url), QUERIES, processes=b.args.clients, passes=2)
        many_orig = (
            searchers(
                b.original,
                search_kwargs(b.original, b.model_url),
                QUERIES[:2],
                processes=b.args.clients,
                passes=1,
            )
            if b.original
            else None
        )
        failed = f"{many_orig['failures']} of {b.args.clients} processes fail" if many_orig else ""
        for q, label in ((0.5, "p50"), (0.95, "p95")):
            b.add(
                Figure(
                    f"search {label}, {b.args.clients} `MemSearch` processes at once",
                    "ms",
                    pct(many["took"], q),
                    original_text=failed,
                    target="≤ 150 ms" if q == 0.95 else "",
                    limit=0.150 if q == 0.95 else None,
                )
            )
        if many["failures"]:
            raise SystemExit(f"ours: {many['failures']} concurrent searchers failed: {many['first_failure']}")
        cli = cli_searches(ours, QUERIES, processes=b.args.clients, each=2)
        for q, label in ((0.5, "p50"), (0.95, "p95")):
            b.add(Figure(f"CLI `search` {label}, {b.args.clients} at once", "s", pct(cli["took"], q)))
        window(b)
        stats_routed = median([run(ours, "stats")[0] for _ in range(b.args.repeat)])
        b.add(Figure("`stats` with the service running", "s", stats_routed))
        changed_routed(b)
        forget(b)
        time.sleep(b.args.settle)  # past the service's heap trim (memsearch.heap, every 10 s)
        b.add(
            Figure(
                "service steady RSS (original: its in-process search's peak)",
                "MB",
                rss_mb(int(service["pid"])),
                orig["maxrss_mb"] if orig else None,
                target="≤ 600 MB" if b.size.chunks >= 100_000 else "",
                limit=600 if b.size.chunks >= 100_000 else None,
            )
        )


def window(b: Bench) -> None:
    """A window of days through the service: all three years (every file in it), and one month."""
    kwargs = search_kwargs(b.ours, b.model_url)
    for label, options in (
        ("all 3 years", {"since": "2023-12-01", "until": "2026-11-30"}),
        ("one month", {"since": "2026-10-01", "until": "2026-10-31"}),
    ):
        got = searchers(b.ours, kwargs, QUERIES, passes=1, options=options)
        b.add(Figure(f"window search p50, {label}, through the service", "ms", median(got["took"])))


def changed_routed(b: Bench) -> None:
    """One journal changed, then ``memsearch index`` of the corpus, answered by the service; then the
    first search after it (the service's view of the store is renewed)."""
    took, first = [], []
    for i in range(b.args.repeat):
        append_turn(b.journal(b.ours), 1000 + i)
        took.append(run(b.ours, "index", str(b.ours.corpus))[0])
        got = searchers(b.ours, search_kwargs(b.ours, b.model_url), QUERIES[:1], passes=1)
        first.append(median(got["took"]))
    b.add(Figure("one changed file, service running: `index`", "s", median(took), target="≤ 1 s", limit=1.0))
    b.add(Figure("first search after that change", "ms", median(first)))


def forget(b: Bench) -> None:
    """``forget --session`` of one session of the first project, through the service."""
    text = b.journal(b.ours).read_text(encoding="utf-8")
    session = re.search(r"session:([0-9a-f-]{36})", text)
    assert session is not None
    folder = str(b.ours.corpus / "memory" / "p00")
    took, _ = run(b.ours, "forget", "--session", session[1], "--memory-dir", folder, "--yes")
    b.add(Figure("`forget --session` (one project's journals)", "s", took))


def changed_cold(b: Bench) -> None:
    """One journal changed, then ``memsearch index`` of the corpus in a fresh process, no service."""
    times = {}
    for t in b.size.tools:
        took = []
        for i in range(b.args.repeat):
            append_turn(b.journal(t), 2000 + i)
            took.append(run(t, "index", str(t.corpus))[0])
        times[t.name] = median(took)
    counts = {}
    for t in b.size.tools:
        append_turn(b.journal(t), 3000)
        counts[t.name] = counted(t, "index", str(t.corpus))
    _index_figures(b, "one changed file, no service", times, counts)


def stats_cold(b: Bench) -> None:
    times = {t.name: median([run(t, "stats")[0] for _ in range(b.args.repeat)]) for t in b.size.tools}
    b.add(Figure("`stats`, no service", "s", times["ours"], times.get("original")))


def recent(b: Bench) -> None:
    """``memsearch recent`` over the whole corpus (every file looked at), the last 30 days."""
    took = median(
        [run(b.ours, "recent", str(b.ours.corpus), "--days", "30")[0] for _ in range(b.args.repeat)]
    )
    b.add(Figure("`recent --days 30` over every file", "s", took))


def watch(b: Bench) -> None:
    """``memsearch watch`` of the corpus: until it says it watches, and from each edit to the line
    that says the file was indexed (``--repeat`` + 1 edits; failed edits are counted)."""
    starts: dict[str, float] = {}
    edits: dict[str, tuple[list[float], list[str]]] = {}
    for t in b.size.tools:
        w = Watch(t, t.corpus, DEBOUNCE_MS)
        try:
            watching = w.wait_for(r"^Watching", w.start)
            if isinstance(watching, str):
                raise SystemExit(f"{t.name}: watch did not start: {watching}")
            starts[t.name] = watching - w.start
            latencies, failures = [], []
            for i in range(b.args.repeat + 1):
                journal = b.journal(t)
                written = time.perf_counter()
                append_turn(journal, 4000 + i)
                seen = w.wait_for(re.escape(journal.name), written, timeout=b.args.edit_timeout)
                if isinstance(seen, str):
                    failures.append(seen)
                else:
                    latencies.append(seen - written)
            edits[t.name] = (latencies, failures)
        finally:
            w.stop()
    b.add(Figure("`watch` start-up (until it watches)", "s", starts["ours"], starts.get("original")))
    (ours, ours_failed), orig = edits["ours"], edits.get("original")
    if ours_failed or not ours:
        raise SystemExit(f"ours: watch did not index an edit: {ours_failed}")
    name = f"`watch`: one edit to its indexed line (debounce {DEBOUNCE_MS} ms)"
    figure = Figure(name, "s", median(ours))
    if orig is not None:
        done, failed = orig
        figure.original = median(done) if done else None
        figure.original_text = "every edit fails" if not done else ""
        if failed:
            figure.original_note = f"{len(failed)} of {len(done) + len(failed)} edits fail: {failed[0]}"
    b.add(figure)


def migrate(b: Bench) -> None:
    """``memsearch migrate`` of ours' store into a ``milvus-lite server`` on 127.0.0.1 (its own data
    folder), copy and verification; then the server's search p50 (ours only: the original has no
    migration, and re-indexing would embed every chunk again)."""
    import tempfile

    from evaluation.bench import _free_port, _wait_for_port, milvus_lite_executable

    with tempfile.TemporaryDirectory(prefix="scale-server-") as data:
        port = _free_port()
        command = [
            milvus_lite_executable(),
            "server",
            "--data-dir",
            data,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_port(port, server)
            uri = f"http://127.0.0.1:{port}"
            took, _ = run(b.ours, "migrate", "--to", uri, "--json-output")
            b.add(Figure("`migrate` to a `milvus-lite server` (copy and verify)", "s", took))
            got = searchers(b.ours, {"milvus_uri": uri}, QUERIES, passes=1)
            b.add(
                Figure(
                    "search p50 on that server (the engine's own search, over gRPC)",
                    "ms",
                    median(got["took"]),
                )
            )
        finally:
            server.terminate()
            server.wait(timeout=30)


#: The row groups, in the order they run (``--only`` picks some; writes come after the reads).
GROUPS: dict[str, Callable[[Bench], None]] = {
    "disk": disk,
    "noop": noop,
    "search": search_inprocess,
    "service": with_service,
    "changed": changed_cold,
    "stats": stats_cold,
    "recent": recent,
    "watch": watch,
    "migrate": migrate,
}


# --- the table ------------------------------------------------------------------------------------


def table(size: Size, figures: list[Figure], minutes: float, load: tuple[float, float], command: str) -> str:
    """One size's block: what was measured where and when, then its table."""
    built = size.stats.get("built", {})
    layout = size.stats.get("stats", {})
    lines = [
        f"**{size.chunks:,} chunks**: {layout.get('journals', 0):,} journals in {layout.get('projects', 0)} "
        f"projects and {layout.get('notes', 0):,} notes. Run of {dt.datetime.now():%Y-%m-%d %H:%M} "
        f"({machine()}; `{command}`; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end; "
        f"{minutes:.0f} min; stores built once: "
        + ", ".join(f"{name} in {info['seconds']:.0f} s" for name, info in built.items())
        + ").",
        "",
        "| figure | original | ours | ours / original | target | verdict |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(f.cells()) + " |" for f in figures]
    return "\n".join(lines)


def machine() -> str:
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {int(mem.split()[1]) / 2**20:.0f} GiB RAM, {platform.machine()}, "
        f"Python {platform.python_version()}"
    )


def update_readme(blocks: dict[int, str]) -> None:
    """Write each size's block between the README's markers, in place of that size's last one
    (sizes measured at other times keep theirs)."""
    readme = README.read_text(encoding="utf-8")
    if START not in readme or END not in readme:
        raise SystemExit(f"{README} has no {START} ... {END} section")
    head, rest = readme.split(START, 1)
    kept, tail = rest.split(END, 1)
    found = {
        int(m[1].replace(",", "")): m[0]
        for m in re.finditer(r"(?ms)^\*\*([\d,]+) chunks\*\*.*?(?=^\*\*[\d,]+ chunks\*\*|\Z)", kept)
    }
    found = {size: text.strip() for size, text in found.items()}
    found.update(blocks)
    body = "\n\n".join(found[size] for size in sorted(found))
    README.write_text(f"{head}{START}\n{body}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="chunks per corpus, comma-separated"
    )
    parser.add_argument("--only", default="", help="only these row groups: " + ", ".join(GROUPS))
    parser.add_argument("--repeat", type=int, default=3, help="runs per timed command (median; default 3)")
    parser.add_argument("--no-original", action="store_true", help="leave the original out")
    parser.add_argument(
        "--clients", type=int, default=CLIENTS, help=f"client processes at once (default {CLIENTS})"
    )
    parser.add_argument(
        "--settle", type=float, default=12.0, help="seconds before the service's RSS is read (default 12)"
    )
    parser.add_argument(
        "--edit-timeout",
        type=float,
        default=EDIT_TIMEOUT,
        help=f"seconds a watch has to index an edit before it counts as failed (default {EDIT_TIMEOUT:g})",
    )
    parser.add_argument("--cache", type=Path, default=None, help="where the stores are built and kept")
    parser.add_argument("--rebuild", action="store_true", help="build the stores again")
    parser.add_argument(
        "--build-only", action="store_true", help="build (or restore) the stores, measure nothing"
    )
    parser.add_argument(
        "--update-readme", action="store_true", help="write the tables into evaluation/README.md"
    )
    args = parser.parse_args(argv)
    groups = [g for g in GROUPS if not args.only or g in args.only.split(",")]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    command = "python -m evaluation.scale " + " ".join(argv if argv is not None else sys.argv[1:])
    blocks: dict[int, str] = {}
    with serving_hashed_vectors() as hash_url, serving_packaged_model() as model_url:
        for chunks in sizes:
            size = prepare(
                chunks, hash_url, with_original=not args.no_original, rebuild=args.rebuild, cache=args.cache
            )
            if args.build_only:
                continue
            for tool in size.tools:
                tool.configure(model_url)
            start, load = time.monotonic(), os.getloadavg()[0]
            log(f"{chunks:,} chunks: measuring (load average {load:.1f})")
            b = Bench(size, model_url, args, [])
            for group in groups:
                GROUPS[group](b)
            minutes = (time.monotonic() - start) / 60
            blocks[chunks] = table(size, b.figures, minutes, (load, os.getloadavg()[0]), command.strip())
            print("\n" + blocks[chunks], flush=True)
            if args.update_readme:
                update_readme({chunks: blocks[chunks]})


if __name__ == "__main__":
    main()
