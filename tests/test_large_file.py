"""A markdown file larger than 20 MiB is indexed (the original indexes it), in bounded memory.

``memsearch index`` runs in a subprocess (with the hash embedder) so its peak RSS can be read
with ``getrusage``; the same run on a small file is the baseline. The test is about reading and
chunking the whole file, not about Milvus Lite's BM25 tokenising of 21 MB (which is Python, ~2 s
per MB): most sections of the file hold only HTML comments (as journal anchors are), which are
read, split and joined like any section but make no chunk; one section in 50 is prose.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MIB = 1024 * 1024

#: Runs the CLI in a child process and appends its peak RSS (KiB on Linux) as the last line.
_CHILD = f"""
import resource, sys
sys.path.insert(0, {str(TESTS)!r})
from hash_embedder import register
register()
from memsearch.cli import cli
try:
    cli(sys.argv[1:], prog_name="memsearch")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
sys.exit(code)
"""


def write_notes(path: Path, size: int) -> int:
    """Journal-like markdown of at least ``size`` bytes; returns the number of prose sections."""
    sentence = "The watcher missed renamed files, so the index kept stale chunks of moved notes. "
    prose = ((sentence * 12).strip() + "\n\n") * 20
    anchors = "".join(
        f"<!-- session:{k:08x} turn:{k * 7:08x} transcript:/tmp/t/{k}.jsonl -->\n" for k in range(250)
    )
    with path.open("w", encoding="utf-8") as fh:
        written, section, with_prose = 0, 0, 0
        while written < size:
            section += 1
            body = prose if section % 50 == 1 else anchors
            with_prose += body is prose
            block = f"## Section {section}\n\n{body}\n"
            fh.write(block)
            written += len(block)
    return with_prose


def index(tmp_path: Path, notes: Path, db: str) -> tuple[subprocess.CompletedProcess[str], int]:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            "index",
            str(notes),
            "--provider",
            "hash",
            "--milvus-uri",
            str(tmp_path / db),
            "--max-chunk-size",
            "60000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    *out, rss = proc.stdout.splitlines()
    proc.stdout = "\n".join(out) + "\n"
    return proc, int(rss) // 1024  # MiB


def test_a_file_over_20_mib_is_indexed_in_bounded_memory(tmp_path: Path) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    write_notes(small / "notes.md", 200_000)
    sections = write_notes(large / "notes.md", 21 * MIB)  # over the 20 MiB the limit used to be
    assert (large / "notes.md").stat().st_size > 21 * MIB

    base, base_rss = index(tmp_path, small, "small.db")
    assert base.returncode == 0, base.stderr
    proc, rss = index(tmp_path, large, "large.db")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Indexed ") and proc.stderr == "", proc.stdout + proc.stderr
    assert proc.stdout == f"Indexed {sections} chunks.\n"  # one per prose section

    # Everything is searchable, to the last section of the file.
    proc_search = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            "search",
            "watcher stale chunks",
            "--provider",
            "hash",
            "--milvus-uri",
            str(tmp_path / "large.db"),
            "--json-output",
            "--top-k",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc_search.returncode == 0, proc_search.stderr
    hits = json.loads(proc_search.stdout.rsplit("\n", 2)[0])
    assert hits and hits[0]["source"] == str(large / "notes.md")
    assert hits[0]["heading"].startswith("Section ")

    # Bounded: the 21 MiB file costs the run at most ~6 copies of itself on top of the small run's
    # peak (its bytes, text, lines and section joins while it is chunked).
    assert rss - base_rss < 6 * 21, (base_rss, rss)
