"""The fence around milvus-lite's internals: one package reads them, on a pinned range, and says when off.

``memsearch.store.lite`` is the only package that imports ``milvus_lite``; ``pyproject.toml`` pins
the milvus-lite and NumPy releases its fast search path was verified on, and its gate
(``memsearch.store.lite.compat``) accepts exactly those. Outside them the engine answers (the same
hits, slower), a process warns once, and ``memsearch stats`` says so for the process that owns
the store. "Outside" is a real older release, milvus-lite 3.2.1 (it lacks an engine method the fast
path calls), installed from the package index into a cached folder and put first on the child
process's ``PYTHONPATH``: nothing of ours is patched.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from evaluation import lite_drift

from cli_process import memsearch
from memsearch.store.lite import MILVUS_LITE_RANGE, NUMPY_RANGE, compat

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "memsearch"
EXAMPLES = ROOT / "examples" / "memory"
#: A real milvus-lite release below the verified range.
OUTSIDE = "3.2.1"
OFF_LINE = f"Lite fast path: off: milvus-lite {OUTSIDE} is outside the verified range"


def _imports_milvus_lite(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        if any(name == "milvus_lite" or name.startswith("milvus_lite.") for name in names):
            return True
    return False


def test_only_the_lite_package_imports_milvus_lite() -> None:
    importers = {path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py") if _imports_milvus_lite(path)}
    assert importers, "the scan found no import at all: it is not looking"
    assert {path for path in importers if not path.startswith("store/lite/")} == set()
    assert {"store/lite/client.py", "store/lite/fast_search.py"} <= importers


def test_pyproject_pins_the_range_the_gate_accepts() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    pins = {re.split(r"[<>=!;\[ ]", dep, maxsplit=1)[0]: dep.split(";")[0].strip() for dep in deps}
    assert pins["milvus-lite"] == f"milvus-lite>={MILVUS_LITE_RANGE[0]},<{MILVUS_LITE_RANGE[1]}"
    assert pins["numpy"] == f"numpy>={NUMPY_RANGE[0]},<{NUMPY_RANGE[1]}"


def test_the_range_bounds() -> None:
    assert compat.in_range(MILVUS_LITE_RANGE[0], MILVUS_LITE_RANGE)
    assert compat.in_range(MILVUS_LITE_RANGE[0] + ".post1", MILVUS_LITE_RANGE)
    assert not compat.in_range(MILVUS_LITE_RANGE[1], MILVUS_LITE_RANGE)
    assert not compat.in_range(OUTSIDE, MILVUS_LITE_RANGE)
    assert not compat.in_range("3.3.0rc1", MILVUS_LITE_RANGE)
    assert not compat.in_range("1.26.4", NUMPY_RANGE) and compat.in_range("2.4.6", NUMPY_RANGE)


def test_this_milvus_lite_is_the_one_the_fast_path_reproduces() -> None:
    from importlib.metadata import version

    assert compat.supported()
    assert compat.decision() == (True, f"milvus-lite {version('milvus-lite')}")


def test_a_failure_at_run_time_warns_once_and_is_counted_for_stats() -> None:
    """``LiteClient`` hands every fast-path exception to ``compat.failed`` and lets the engine answer;
    in a fresh process (the warning is once per process) two failures give one line, and the state
    line counts both."""
    code = (
        "from memsearch.store.lite import compat\n"
        "compat.failed(ValueError('first'))\n"
        "compat.failed(KeyError('second'))\n"
        "compat.warn_off('not repeated either')\n"
        "print(compat.state_line())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "Milvus Lite fast search path failed (ValueError: first); the engine's own search answered: "
        "same results, several times slower (`memsearch stats` counts the failures)"
    ]
    version = compat.decision()[1]
    assert proc.stdout == (
        f"Lite fast path: on ({version}), but it failed 2 times in this process, "
        "the last: KeyError: 'second'\n"
    )


# -- run time: a real release outside the range ------------------------------------------------


@pytest.fixture(scope="session")
def outside_site() -> Path:
    """A folder holding milvus-lite 3.2.1 alone (cached across runs; the index is asked once)."""
    try:
        return lite_drift.install(OUTSIDE, lite_drift.Deadline(180))
    except Exception as exc:  # the index is part of the suite's setup (make test installs from it)
        pytest.fail(f"could not install milvus-lite {OUTSIDE} from the package index: {exc}")


def outside_env(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.fixture
def uri(tmp_path: Path) -> str:
    memory = tmp_path / "memory"
    shutil.copytree(EXAMPLES, memory)
    uri = str(tmp_path / "fence.db")
    proc = memsearch("index", str(memory), "--milvus-uri", uri, env={"MEMSEARCH_NO_SERVICE": "1"})
    assert proc.returncode == 0, proc.stderr
    return uri


def _search(uri: str, env: dict[str, str]) -> tuple[list[dict[str, object]], list[str]]:
    proc = memsearch("search", "database connection timeout", "-j", "-k", "4", "--milvus-uri", uri, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.splitlines()


@pytest.mark.model
def test_outside_the_range_the_engine_answers_and_one_line_says_why(uri: str, outside_site: Path) -> None:
    direct = {"MEMSEARCH_NO_SERVICE": "1"}
    on_hits, on_err = _search(uri, direct)
    assert not [line for line in on_err if "fast search path" in line]
    off_hits, off_err = _search(uri, {**direct, **outside_env(outside_site)})
    assert off_hits == on_hits  # the engine's own search: the same answer, only slower
    warned = [line for line in off_err if "fast search path" in line]
    assert warned == [
        f"Milvus Lite fast search path off: milvus-lite {OUTSIDE} is outside the verified range "
        f"{MILVUS_LITE_RANGE[0]} to below {MILVUS_LITE_RANGE[1]}; {compat.COST}"
    ]  # once, though both legs asked

    on_stats = memsearch("stats", "--milvus-uri", uri, env=direct)
    assert on_stats.returncode == 0 and on_stats.stdout == "Total indexed chunks: 9\n"
    off_stats = memsearch("stats", "--milvus-uri", uri, env={**direct, **outside_env(outside_site)})
    assert off_stats.returncode == 0, off_stats.stderr
    lines = off_stats.stdout.splitlines()
    assert lines[0] == "Total indexed chunks: 9"
    assert len(lines) == 2 and lines[1].startswith(OFF_LINE) and compat.COST in lines[1]


@pytest.mark.model
def test_stats_describes_the_fast_path_of_the_process_that_owns_the_store(
    uri: str, outside_site: Path
) -> None:
    """A memory service answers the searches, so its fast path is the one that counts: a service
    on the old release is reported as off to a caller whose own milvus-lite is in the range, and a
    service in the range as on to a caller on the old release."""
    from test_service import start_service

    for service_env, caller_env, off in (
        (outside_env(outside_site), {}, True),
        ({}, outside_env(outside_site), False),
    ):
        service = start_service(uri, env=service_env)
        try:
            hits, err = _search(uri, caller_env)
            assert hits and not [line for line in err if "fast search path" in line]  # the service searched
            stats = memsearch("stats", "--milvus-uri", uri, env=caller_env)
            assert stats.returncode == 0, stats.stderr
            lines = stats.stdout.splitlines()
            assert lines[0] == "Total indexed chunks: 9"
            assert lines[1].startswith(f"Memory service: running (pid {service.pid}")
            assert (lines[2:] and lines[2].startswith(OFF_LINE)) if off else lines[2:] == []
        finally:
            service.terminate()
            service.wait(timeout=60)
