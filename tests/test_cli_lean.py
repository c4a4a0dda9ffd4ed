"""The memsearch process loads what its command needs: no pandas, no pkg_resources for jieba,
pyarrow on the system allocator."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``memsearch ARGS`` through the console entry point, reporting what the process loaded."""
    code = textwrap.dedent(
        f"""
        import atexit, json, sys

        def report():
            import pyarrow
            loaded = [
                "pandas" in sys.modules,
                pyarrow.default_memory_pool().backend_name,
                "jieba" in sys.modules and "pkg_resources" not in sys.modules,
            ]
            print("LOADED " + json.dumps(loaded), file=sys.stderr)

        atexit.register(report)
        from memsearch.cli import main
        sys.argv = ["memsearch", *{args!r}]
        main()
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


def loaded(proc: subprocess.CompletedProcess[str]) -> list[object]:
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")]
    result: list[object] = json.loads(line.removeprefix("LOADED "))
    return result


def test_index_and_search_on_lite_never_import_pandas_or_pkg_resources(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "2026-01-01.md").write_text(
        "# Notes\n\nThe database connection timed out after the upgrade; we raised the pool size.\n"
        "\n## 中文\n\n数据库连接超时，重启之后恢复了。\n",
        encoding="utf-8",
    )
    uri = str(tmp_path / "m.db")
    index = run_cli(["index", str(memory), "--milvus-uri", uri], tmp_path)
    assert index.returncode == 0, index.stderr
    assert loaded(index) == [False, "system", True]
    search = run_cli(["search", "database timeout", "-j", "--milvus-uri", uri], tmp_path)
    assert search.returncode == 0, search.stderr
    assert loaded(search) == [False, "system", True]
    results = json.loads(search.stdout)
    assert results and "timed out" in results[0]["content"]


def test_pandas_still_imports_for_pymilvus_and_for_library_users(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from memsearch.cli.lean import lean_process\n"
        "lean_process()\n"
        "try:\n    import pandas\nexcept ModuleNotFoundError:\n    print('blocked')\n"
        "import pymilvus, pandas\n"
        "print('imported', pandas.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["blocked", "imported", "pandas"]
    library = subprocess.run(
        [sys.executable, "-c", "import memsearch, memsearch.core, pandas; print('ok')"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert library.stdout.strip() == "ok"


def test_jieba_without_pkg_resources_still_finds_its_dictionary_and_others_get_it() -> None:
    code = (
        "import sys\n"
        "from memsearch.cli.lean import lean_process\n"
        "lean_process()\n"
        "import jieba\n"
        "print('pkg_resources' in sys.modules)\n"
        "tokenizer = jieba.Tokenizer()\n"
        "tokenizer.initialize()\n"  # jieba's own loader: its dictionary file, found without it
        "print(len(tokenizer.FREQ) > 300_000, '/'.join(tokenizer.cut('数据库连接超时')))\n"
        "import pkg_resources\n"  # anyone else still gets it
        "print(pkg_resources.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["False", "True", "数据库/连接/超时", "pkg_resources"]
