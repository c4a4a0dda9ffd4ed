"""``memsearch.engine.backups``: kept originals, their holes, their tidying (real files, no model).

The commands are tested end to end in test_undo.py and test_forget_secret.py; here the seam's own
rules, quickly: a kept file with the places of two forgotten values (the second forgotten after
the first, so the first's holes move) comes back byte for byte with both values and not without;
the retention rule; a pending backup whose maker died and that no change committed is removed, one
whose maker still holds its lock is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.engine import backups
from memsearch.engine.edits import plan_spans, transform
from memsearch.engine.forget_secret import LABEL, spans_of
from memsearch.errors import SecretNeededError


def _root() -> Path:
    return Path(os.environ["HOME"]) / ".memsearch" / "backups"


def _forget_in_backups(value: str) -> None:
    """What ``forget --secret`` does to each kept file holding ``value`` (the planned edit, applied)."""
    check = {**backups.verifier(value), "label": LABEL}
    for blob in _root().glob("*/*.blob"):
        raw = blob.read_bytes()
        body = raw.index(b"\n") + 1
        spans = spans_of(raw[body:], value)
        if spans:
            edit = plan_spans(blob, raw, [(s, e, str(f)) for s, e, f in spans], "backup", check)
            blob.write_bytes(transform(edit, raw) or b"")


def test_a_kept_file_with_two_forgotten_values_comes_back_byte_for_byte_with_both(tmp_path: Path) -> None:
    first, second = 'pa"ss-Qw9Kz2', "tok-Vb7Nm3Lx"
    original = (
        f'# notes\n{second} then {first}\n{{"k": {json.dumps(first)}}} {second}\nend {first}\n'.encode()
    )
    note = tmp_path / "notes.md"
    note.write_bytes(b"# notes\nafter the change\n")
    kept = backups.stage(
        "scan", "scan --redact", [backups.KeptFile(note, original, note.read_bytes(), False)]
    )
    backups.publish(kept.id)
    kept.close()
    _forget_in_backups(first)
    _forget_in_backups(second)
    blob = next(_root().glob("*/0.blob")).read_bytes()
    assert all(f not in blob for v in (first, second) for f in backups.forms(v))
    assert backups.listing("scan")[0].values_needed == 2

    with pytest.raises(SecretNeededError, match="the restore needs it"):
        backups.restore(kept.id)
    with pytest.raises(SecretNeededError, match="none of the values given"):
        backups.restore(kept.id, [first])  # one of the two is not enough
    restored = backups.restore(kept.id, [second, first, "unrelated"])
    assert [r.path for r in restored] == [str(note)]
    assert note.read_bytes() == original
    assert backups.listing() == []


def test_the_retention_rule_keeps_the_newest_and_the_recent(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("x")
    made = []
    for _ in range(backups.KEEP_COUNT + 2):
        kept = backups.stage("forget", "forget", [backups.KeptFile(note, b"y", b"x", False)])
        backups.publish(kept.id)
        kept.close()
        made.append(kept.id)
    listed = [b.id for b in backups.listing()]
    assert len(listed) == backups.KEEP_COUNT and set(listed) <= set(made)
    old = _root() / listed[-1] / "record.json"  # one of them made long ago
    record = json.loads(old.read_text())
    old.write_text(json.dumps({**record, "created": time.time() - (backups.KEEP_DAYS + 1) * 86400}))
    backups.sweep(None)
    assert listed[-1] not in {b.id for b in backups.listing()}
    assert len(backups.listing()) == backups.KEEP_COUNT - 1


HOLD = """
import sys, time
from pathlib import Path
from memsearch.engine import backups
kept = backups.stage("forget", "forget", [backups.KeptFile(Path(sys.argv[1]), b"y", b"x", False)])
print(kept.id, flush=True)
time.sleep(60)
"""


def test_a_pending_backup_is_removed_only_when_its_maker_is_gone_and_nothing_committed_it(
    tmp_path: Path,
) -> None:
    note = tmp_path / "n.md"
    note.write_text("x")
    maker = subprocess.Popen([sys.executable, "-c", HOLD, str(note)], stdout=subprocess.PIPE, text=True)
    assert maker.stdout is not None
    pending = maker.stdout.readline().strip()
    backups.sweep(committed=lambda _id: False)
    assert (_root() / pending).is_dir()  # its maker holds the lock: not abandoned
    maker.kill()
    maker.communicate()
    backups.sweep(committed=lambda backup_id: backup_id == pending)
    assert (_root() / pending).is_dir()  # a committed change names it: it will be published
    backups.sweep(committed=lambda _id: False)
    assert not (_root() / pending).exists() and backups.listing() == []
