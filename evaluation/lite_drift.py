"""``python -m evaluation.lite_drift``: does the fast Lite search path still equal the newest milvus-lite?

Why: ``memsearch.store.lite.fast_search`` reproduces milvus-lite's search from its internals, so
``pyproject.toml`` pins the releases it was verified on. This check tells when a newer release
appears and whether the pin can be widened: it installs the newest milvus-lite on the package
index into a cached side folder (``~/.cache/memsearch/lite-drift/milvus-lite-X.Y.Z``, the wheel
alone, layered over this environment's packages with ``PYTHONPATH``), runs the equivalence tests
(``tests/test_lite_search.py``, which call the fast path directly, past the version gate) against
it, and prints one line:

    lite drift: milvus-lite 3.2.2 (the pinned range): equivalent
    lite drift: milvus-lite 3.3.0 (outside the pinned range 3.2.2 to below 3.2.3): DIFFERS: test_a, test_b

It exits 0 whatever it finds, and when the index does not answer or the time box
(:data:`BUDGET`) runs out it says so in its line: CI shows the line and never fails on it. Only a
broken script exits non-zero.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = "tests/test_lite_search.py"
#: Seconds for the whole check (index lookup, install, tests): CI must not wait longer.
BUDGET = 170.0


def cache_dir() -> Path:
    """The side installs' folder, in the real user's cache (not a test's isolated ``HOME``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache")
    return Path(base) / "memsearch" / "lite-drift"


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(1.0, self.end - time.monotonic())


def newest(deadline: Deadline) -> str | None:
    """The newest milvus-lite release on the package index, or None when the index did not answer."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "milvus-lite"],
            capture_output=True,
            text=True,
            timeout=min(60.0, deadline.left()),
        )
    except subprocess.TimeoutExpired:
        return None
    found = re.search(r"^milvus-lite \(([^)]+)\)", proc.stdout, re.MULTILINE)
    return found.group(1) if proc.returncode == 0 and found else None


def install(version: str, deadline: Deadline) -> Path:
    """milvus-lite ``version`` (the wheel alone) in its cached folder; installed once."""
    target = cache_dir() / f"milvus-lite-{version}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".milvus-lite-{version}-", dir=target.parent))
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(scratch),
                f"milvus-lite=={version}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=min(120.0, deadline.left()),
        )
        (scratch / ".complete").touch()
        shutil.rmtree(target, ignore_errors=True)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _env(site: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return env


def compare(site: Path | None, version: str, deadline: Deadline) -> str:
    """The verdict on the equivalence tests run with ``site``'s milvus-lite first on the path."""
    env = _env(site)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.metadata as m, milvus_lite; print(m.version('milvus-lite'))",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=min(60.0, deadline.left()),
    )
    if probe.returncode != 0 or probe.stdout.strip() != version:
        why = (probe.stderr.strip().splitlines() or [probe.stdout.strip()])[-1]
        return f"cannot import it over this environment's packages ({why})"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", TESTS],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=deadline.left(),
    )
    if proc.returncode == 0:
        return "equivalent"
    failed = re.findall(r"^(?:FAILED|ERROR) \S+::(\w+)", proc.stdout, re.MULTILINE)
    if not failed:
        last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
        return f"DIFFERS: the tests did not run ({last})"
    return "DIFFERS: " + ", ".join(dict.fromkeys(failed))


def check(budget: float = BUDGET, release: str | None = None) -> str:
    """The one line (see the module docstring); ``release`` checks that one instead of the newest."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    from memsearch.store.lite import MILVUS_LITE_RANGE
    from memsearch.store.lite.compat import in_range

    deadline = Deadline(budget)
    latest = release or newest(deadline)
    if latest is None:
        return "lite drift: skipped: the package index did not answer (pip index versions milvus-lite)"
    low, high = MILVUS_LITE_RANGE
    where = (
        "the pinned range"
        if in_range(latest, MILVUS_LITE_RANGE)
        else f"outside the pinned range {low} to below {high}"
    )
    step = "installing it"
    try:
        try:
            here = installed("milvus-lite")
        except PackageNotFoundError:
            here = None
        site = None if here == latest else install(latest, deadline)
        step = "running the equivalence tests"
        verdict = compare(site, latest, deadline)
    except subprocess.TimeoutExpired:
        verdict = f"no verdict within {budget:g} s (timed out {step})"
    except subprocess.CalledProcessError as exc:
        why = (str(exc.stderr or "").strip().splitlines() or ["pip failed"])[-1]
        verdict = f"not checked: it did not install ({why})"
    return f"lite drift: milvus-lite {latest} ({where}): {verdict}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m evaluation.lite_drift", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--release", help="check this milvus-lite release instead of the newest")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds for the whole check")
    args = parser.parse_args(argv)
    print(check(args.budget, args.release), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
