"""A markdown file whose name is not valid UTF-8 (as other systems and old archives leave them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from memsearch.cli import cli


def test_a_file_name_that_is_not_utf8_is_indexed_and_found(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    name = os.path.join(os.fsencode(notes), b"caf\xe9-notes.md")  # Latin-1 "café": invalid UTF-8
    with open(name, "wb") as fh:
        fh.write(b"# Backups\n\nThe nightly backup job rotates snapshots.\n")
    db = str(tmp_path / "m.db")
    runner = CliRunner()
    r = runner.invoke(
        cli, ["index", str(notes), "--provider", "hash", "--milvus-uri", db], catch_exceptions=False
    )
    assert (r.exit_code, r.stdout) == (0, "Indexed 1 chunk.\n"), r.output
    r = runner.invoke(
        cli,
        ["search", "nightly backup", "--provider", "hash", "--milvus-uri", db, "--json-output"],
        catch_exceptions=False,
    )
    hits = json.loads(r.stdout)
    assert hits[0]["source"] == str(notes / "caf\ufffd-notes.md")  # stored as UTF-8, U+FFFD for the byte
    # Unchanged on the next run (the manifest keys the file by its real name).
    r = runner.invoke(
        cli, ["index", str(notes), "--provider", "hash", "--milvus-uri", db], catch_exceptions=False
    )
    assert r.stdout == "Indexed 0 chunks.\n"
