"""Speed and memory benchmark of memsearch (``make bench``): prints a table of medians.

Corpora come from the project's deterministic generator (``evaluation/gen_corpus.py``: journals of
a fictional project as the agent plugins write them; ``--gen`` runs another script with the same
command line). Every figure is measured several times and the median reported, because this
2-core machine is noisy. Each measurement runs in fresh processes, as a user would run the CLI,
with its own HOME so no cache or manifest leaks between runs.

Figures:
- full index of the 2,000-chunk corpus with the default ONNX model: wall time and chunks/s, next
  to the embedding-only chunks/s of the same model on the same texts (the ceiling);
- no-op re-index, one changed file, ``search`` from the CLI with the service off and on, ``--help``;
- in-process search latency (p50) and peak RSS while indexing, at 2,000 and 20,000 chunks. The
  20,000-chunk runs embed with a fast hashing embedder of the same dimension (384) so the run
  takes minutes, not half an hour: they measure the indexer and the store at scale, not the model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GEN = ROOT / "evaluation" / "gen_corpus.py"

#: A child process that indexes a corpus in-process with a fast 384-dim hashing embedder and
#: reports its peak RSS (KiB) and the in-process search latencies (seconds).
_SCALE_CHILD = r"""
import asyncio, hashlib, json, math, re, resource, sys, time
from memsearch import MemSearch
from memsearch.embeddings import ProviderSpec, register_provider
from memsearch.embeddings.base import ApiErrors, BatchingEmbedder

class Fast(BatchingEmbedder):
    provider_name = "bench-hash"
    default_model = "bench-hash-384"
    default_batch_size = 64
    known_dimensions = {"bench-hash-384": 384}
    api_errors = ApiErrors("bench-hash")
    async def _embed_batch(self, conn, texts, *, query):
        out = []
        for t in texts:
            v = [0.0] * 384
            for tok in re.findall(r"\w+", t.lower()):
                h = hashlib.blake2b(tok.encode(), digest_size=4).digest()
                v[int.from_bytes(h, "little") % 384] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out

OPTIONS = frozenset({"model", "batch_size"})
register_provider(ProviderSpec("bench-hash", Fast, "bench-hash-384", None, OPTIONS))
corpus, uri, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

async def main():
    with MemSearch([corpus], embedding_provider="bench-hash", milvus_uri=uri, embedding_cache=False) as ms:
        t = time.perf_counter()
        n = await ms.index()
        took = time.perf_counter() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        lat = []
        for q in queries * 5:
            t = time.perf_counter()
            await ms.search(q, top_k=5)
            lat.append(time.perf_counter() - t)
    print(json.dumps({"chunks": n, "index_s": took, "rss_kib": rss, "search_s": lat}))

asyncio.run(main())
"""


def run(cmd: list[str], env: dict[str, str], **kw: object) -> float:
    """Wall time of one command; fails loudly if the command fails."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{proc.stderr}")
    return took


def compile_package() -> None:
    """Byte-compile memsearch first, as ``pip install`` does.

    An editable checkout run with PYTHONDONTWRITEBYTECODE=1 (as on this machine) would otherwise
    recompile every module in every measured process: ~40 ms that no installed copy pays.
    """
    import memsearch

    package = Path(memsearch.__file__).resolve().parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, capture_output=True)


#: The "no service" rows measure a command that opens the store itself: no service on demand.
NO_AUTOSTART = {"MEMSEARCH_SERVICE_AUTOSTART": "0"}


def memsearch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "memsearch", *args]


def median(values: list[float]) -> float:
    return statistics.median(values)


def gen(gen_py: Path, out: Path, chunks: int) -> Path:
    """The generator's corpus of ``chunks`` turns, ~33 per daily file (60 files for 2,000)."""
    files = max(2, chunks // 33)
    if not (out / "memory").is_dir():
        subprocess.run(
            [sys.executable, str(gen_py), str(out), "--chunks", str(chunks), "--files", str(files)],
            check=True,
            capture_output=True,
        )
    return out / "memory"


def queries(gen_py: Path, out: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(gen_py), str(out), "--queries"], check=True, capture_output=True, text=True
    )
    return [q for q in proc.stdout.splitlines() if q.strip()][:10]


def embedding_only(texts: list[str]) -> float:
    """chunks/s of the default ONNX model alone on these texts (the indexer's ceiling)."""
    from memsearch.chunker import clean_content_for_embedding
    from memsearch.embeddings import get_provider

    provider = get_provider("onnx")
    cleaned = [clean_content_for_embedding(t) for t in texts]
    asyncio.run(provider.embed(cleaned[:8]))  # load the session outside the timing
    t = time.perf_counter()
    asyncio.run(provider.embed(cleaned))
    return len(cleaned) / (time.perf_counter() - t)


def corpus_texts(memory: Path) -> list[str]:
    from memsearch.chunker import chunk_markdown

    texts: list[str] = []
    for f in sorted(memory.glob("*.md")):
        texts += [c.content for c in chunk_markdown(f.read_text(encoding="utf-8"), str(f))]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gen", type=Path, default=DEFAULT_GEN, help="path of gen_corpus.py")
    parser.add_argument("--repeat", type=int, default=5, help="runs per quick measurement")
    parser.add_argument(
        "--full-repeat",
        type=int,
        default=2,
        help="full 2,000-chunk index runs (each paired with embedding-only)",
    )
    parser.add_argument("--chunks", type=int, default=2000, help="chunks in the main corpus")
    parser.add_argument("--large", type=int, default=20000, help="chunks in the large corpus (0 skips it)")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temp dir)")
    args = parser.parse_args()
    if not args.gen.is_file():
        raise SystemExit(f"gen_corpus.py not found at {args.gen}; pass --gen PATH")

    compile_package()
    work = args.work or Path(tempfile.mkdtemp(prefix="memsearch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    small = gen(args.gen, work / "c2k", args.chunks)
    qs = queries(args.gen, work / "c2k")
    rows = _Rows()

    def env_for(name: str) -> dict[str, str]:
        home = work / f"home-{name}"
        if home.exists():
            shutil.rmtree(home)
        home.mkdir()
        return {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", **NO_AUTOSTART}

    # --help
    env = env_for("help")
    helps = [run(memsearch_cmd("--help"), env) for _ in range(args.repeat)]
    rows.append(("`memsearch --help`", f"{median(helps):.3f} s", "≤ 0.15 s"))

    # full index (default model) + embedding-only ceiling on the same texts, measured in pairs
    # back to back: the machine's speed drifts over minutes, so each index run is compared with
    # an embedding-only run taken right after it.
    texts = corpus_texts(small)
    fulls: list[float] = []
    embed_rates: list[float] = []
    for i in range(args.full_repeat):
        env = env_for(f"full{i}")
        fulls.append(run(memsearch_cmd("index", str(small), "--milvus-uri", str(work / f"full{i}.db")), env))
        embed_rates.append(embedding_only(texts))
    full_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
    ratios = [len(texts) / took / rate for took, rate in zip(fulls, embed_rates, strict=True)]
    rows.append((f"full index, {len(texts):,} chunks (wall)", f"{median(fulls):.1f} s", ""))
    rows.append(("full index throughput", f"{len(texts) / median(fulls):.1f} chunks/s", ""))
    rows.append(
        (
            "embedding-only throughput (same model, same texts)",
            f"{median(embed_rates):.1f} chunks/s",
            "ceiling",
        )
    )
    rows.append(
        (
            "full index / embedding-only (median of back-to-back pairs)",
            f"{100 * median(ratios):.1f} % ({', '.join(f'{100 * r:.1f}' for r in ratios)})",
            "≥ 85 %",
        )
    )
    rows.append(
        (f"peak RSS of `memsearch index`, {len(texts):,} chunks, default model", f"{full_rss:.0f} MB", "")
    )

    # no-op re-index and one changed file, on the index built above
    env = {
        **os.environ,
        "HOME": str(work / "home-full0"),
        "HF_HUB_OFFLINE": "1",
        **NO_AUTOSTART,
    }  # run 0's index
    uri = str(work / "full0.db")
    noops = [run(memsearch_cmd("index", str(small), "--milvus-uri", uri), env) for _ in range(args.repeat)]
    rows.append((f"no-op re-index, {len(texts):,} chunks", f"{median(noops):.3f} s", "≤ 0.3 s"))

    def edit_and_index() -> float:
        subprocess.run(
            [sys.executable, str(args.gen), str(work / "c2k"), "--edit-one"], check=True, capture_output=True
        )
        return run(memsearch_cmd("index", str(small), "--milvus-uri", uri), env)

    edits = [edit_and_index() for _ in range(args.repeat)]
    rows.append(("one changed file (incl. embedding it)", f"{median(edits):.2f} s", "≤ 0.8 s + embedding"))

    # CLI search, service off and on
    # A different query each run, as real use asks (no warm caches from the previous run).
    def search(query: str) -> float:
        return run(memsearch_cmd("search", query, "-j", "--milvus-uri", uri), env)

    off = [search(qs[i % len(qs)]) for i in range(args.repeat)]
    rows.append(("CLI `search`, no service", f"{median(off):.2f} s", "≤ 1.2 s"))
    serve = subprocess.Popen(
        memsearch_cmd("serve", "--milvus-uri", uri),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_ready(uri, env)
        on = [search(qs[-1 - i % len(qs)]) for i in range(args.repeat)]
        edits_on = [edit_and_index() for _ in range(args.repeat)]
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    rows.append(("CLI `search`, service running", f"{median(on):.3f} s", "≤ 0.15 s"))
    rows.append(("one changed file, service running", f"{median(edits_on):.2f} s", "≤ 0.8 s + embedding"))

    # in-process search + peak RSS at 2,000 and 20,000 chunks (fast embedder, see module docstring)
    sizes = [(args.chunks, small)]
    if args.large:
        sizes.append((args.large, gen(args.gen, work / "c-large", args.large)))
    for n, memory in sizes:
        results = []
        for i in range(max(1, args.full_repeat)):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _SCALE_CHILD,
                    str(memory),
                    str(work / f"scale-{n}-{i}.db"),
                    json.dumps(qs),
                ],
                env=env_for(f"scale{n}"),
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        rss = median([r["rss_kib"] / 1024 for r in results])
        p50 = median([median(r["search_s"]) for r in results]) * 1000
        rows.append(
            (f"peak RSS while indexing {n:,} chunks (fast embedder)", f"{rss:.0f} MB", "≤ 600 MB, flat")
        )
        rows.append((f"in-process search p50 at {n:,} chunks", f"{p50:.1f} ms", "≤ 30 ms at 20,000"))

    print(
        f"\nmemsearch benchmark — {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(f"medians of {args.repeat} runs ({args.full_repeat} for full indexes)\n")
    print("| measurement | result | target |")
    print("|---|---|---|")
    for name, value, target in rows:
        print(f"| {name} | {value} | {target} |")


class _Rows(list):  # type: ignore[type-arg]
    """The result table; each row is also printed to stderr as soon as it is measured."""

    def append(self, row: tuple[str, str, str]) -> None:
        print(f"  {row[0]}: {row[1]}", file=sys.stderr, flush=True)
        super().append(row)


def _wait_ready(uri: str, env: dict[str, str]) -> None:
    """Wait until the service answers ``ready`` (its model and store are loaded)."""
    code = (
        "import sys\nfrom memsearch.service import ServiceClient, service_paths\n"
        f"print(ServiceClient(service_paths({uri!r})).ping().get('ready'))\n"
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if proc.stdout.strip() == "True":
            return
        time.sleep(0.5)
    raise SystemExit("the memory service did not become ready")


if __name__ == "__main__":
    main()
