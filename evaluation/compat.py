"""``make compat``: the original memsearch 0.4.23's own test suite, run against this package.

Why: "switch without noticing" is a claim about behaviour the original's authors cared enough to
test. This script fetches the original's source release (its ``tests/`` folder) from the package
registry once, runs those tests with this package installed as ``memsearch``, and sorts every
failure into one of four bins:

- private: the test reaches into the original's internals (a module attribute, a private helper,
  a module that only the original has, or monkeypatching its wiring): not an API a user calls;
- deliberate: a documented difference (docs/compatibility.md), each with its reason below;
- gap: a known missing feature, with the issue that tracks it;
- unexplained: anything else. The target is none; the script exits 1 if there is one.

Usage: ``python -m evaluation.compat [--keep DIR]`` (the Makefile's ``compat`` target).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ORIGINAL = "memsearch==0.4.23"
CACHE = Path.home() / ".cache" / "memsearch-test-hosts"

#: Failures that reach into internals the original exposes only to its own tests.
PRIVATE = re.compile(
    r"has no attribute '|cannot import name '|No module named 'memsearch\.|"
    r"monkeypatch|object has no attribute"
)

#: The original's Python entry to distilling, ``skills.distill(..., llm_runner=...)``: here distilling
#: is the ``memory_to_skill`` maintenance task (``memsearch.maintenance``, ``memsearch skills
#: distill``), so these tests, which call that function with a stand-in model, have nothing to call.
_DISTILL = (
    "deliberate",
    "calls the original's `skills.distill(..., llm_runner=)`; distilling is the memory_to_skill "
    "maintenance task here (docs/compatibility.md maps each behaviour to a test of ours)",
)

#: Test-id prefix -> (bin, reason). Checked before the private rule, so a missing public module
#: (a gap) is not mistaken for an internal one.
KNOWN: dict[str, tuple[str, str]] = {
    "tests/test_skills.py::test_distill_creates_candidate_and_commits": _DISTILL,
    "tests/test_skills.py::test_distill_skips_unchanged_input": _DISTILL,
    "tests/test_skills.py::test_distill_disabled_by_default": _DISTILL,
    "tests/test_skills.py::test_distill_failure_records_state": _DISTILL,
    "tests/test_skills.py::test_install_copies_to_paths_and_updates_meta": _DISTILL,
    "tests/test_skills.py::test_distill_evolves_existing_candidate_body": _DISTILL,
    "tests/test_skills.py::test_installed_skill_source_keeps_evolving": _DISTILL,
    "tests/test_skills.py::test_candidate_review_summary_counts_pending_versions": _DISTILL,
    "tests/test_skills.py::test_distill_runs_when_disabled_if_require_enabled_false": _DISTILL,
    "tests/test_skills.py::test_distill_honors_custom_input_dir": _DISTILL,
    "tests/test_skills.py::test_revision_prompt_includes_current_body": _DISTILL,
    "tests/test_skills.py::test_installed_candidate_with_legacy_meta_is_pending": (
        "deliberate",
        "`skills.list_candidates` returns `Candidate` objects, not dicts (the original's keys are in "
        "`memsearch skills list --json-output`); the behaviour is mapped in docs/compatibility.md",
    ),
    "tests/test_jev_reranker.py": (
        "private",
        "replaces urllib.request.urlopen (ours posts through its own opener, so the stand-in is never "
        "called) or the original reranker's internals; tests/test_jev_reranker.py here covers the "
        "behaviour against a local server",
    ),
    "tests/test_embeddings_google.py": (
        "private",
        "replaces the google-genai SDK the original's provider wraps; ours speaks the REST API "
        "(tests/test_embeddings_vertex.py covers Vertex AI mode against a local server)",
    ),
    "tests/test_chunker.py::test_long_cjk_text_splits": (
        "deliberate",
        "the test repeats one sentence: identical parts of one line have the same chunk ID, "
        "and we emit each ID once (the original emits duplicate IDs)",
    ),
    "tests/test_transcript_parser.py::test_render_is_capped": (
        "deliberate",
        "the cap keeps the newest turns and says how many earlier ones it left out",
    ),
    "tests/test_compact_cli.py::test_compact_shows_matched_source_when_no_chunks": (
        "private",
        "replaces memsearch.core.MemSearch with a stand-in",
    ),
    "tests/test_compact_cli.py::test_compact_reads_prompt_file_and_passes_template": (
        "private",
        "replaces memsearch.core.MemSearch with a stand-in",
    ),
    "tests/test_opencode_turns.py::test_native_custom_prompt_bullet_validation_and_failure": (
        "private",
        "drives the original OpenCode plugin's own Python capture module",
    ),
}


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # passed | skipped | failed
    message: str = ""


def source_release(cache: Path = CACHE) -> Path:
    """The original's unpacked source release (downloaded once into ``cache``)."""
    root = cache / "memsearch-0.4.23-src"
    tree = root / "memsearch-0.4.23"
    if (root / ".installed").exists():
        return tree
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-binary",
            ":all:",
            "--no-deps",
            "-d",
            str(root),
            ORIGINAL,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if got.returncode != 0:
        raise SystemExit(f"downloading {ORIGINAL} failed:\n{got.stderr}")
    with tarfile.open(next(root.glob("memsearch-0.4.23.tar.gz"))) as archive:
        archive.extractall(root, filter="data")
    (root / ".installed").write_text(ORIGINAL + "\n")
    return tree


def run_suite(tree: Path, work: Path) -> list[Outcome]:
    """Run the original's tests (a copy, so the cache stays clean) with this package installed."""
    copy = work / "original"
    shutil.copytree(tree, copy)
    report = work / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests",
            "--continue-on-collection-errors",
            f"--junitxml={report}",
            "-o",
            "addopts=",
            "-W",
            "ignore",
        ],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        module, name = case.get("classname") or "", case.get("name") or ""
        # A module that fails to import is one case with no class: its name is the module.
        test = f"{module.replace('.', '/')}.py::{name}" if module else f"{name.replace('.', '/')}.py"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            detail = (
                f"{bad.get('message') or ''} {bad.text or ''}" if not module else bad.get("message") or ""
            )
            outcomes.append(Outcome(test, "failed", " ".join(detail.split())))
        elif case.find("skipped") is not None:
            outcomes.append(Outcome(test, "skipped"))
        else:
            outcomes.append(Outcome(test, "passed"))
    return outcomes


def classify(outcome: Outcome) -> tuple[str, str]:
    """(bin, reason) of one failed test."""
    for prefix, verdict in KNOWN.items():
        if outcome.test.startswith(prefix):
            return verdict
    if PRIVATE.search(outcome.message):
        return "private", outcome.message[:120]
    return "unexplained", outcome.message[:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the run's files in this folder")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memsearch-compat-"))
    work.mkdir(parents=True, exist_ok=True)
    outcomes = run_suite(source_release(), work)
    counts = Counter(o.status for o in outcomes)
    bins: dict[str, list[tuple[str, str]]] = {}
    for outcome in outcomes:
        if outcome.status == "failed":
            kind, reason = classify(outcome)
            bins.setdefault(kind, []).append((outcome.test, reason))
    print(
        f"The original {ORIGINAL}'s tests against this package: {len(outcomes)} "
        "(a module that fails to import counts once)"
    )
    print(f"  passed {counts['passed']}, skipped {counts['skipped']}, failed {counts['failed']}")
    for kind in ("private", "deliberate", "gap", "unexplained"):
        print(f"  {kind}: {len(bins.get(kind, []))}")
    for kind in ("deliberate", "gap", "unexplained"):
        for test, reason in bins.get(kind, []):
            print(f"{kind:12} {test}\n             {reason}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bins.get("unexplained") else 0


if __name__ == "__main__":
    raise SystemExit(main())
