"""What memsearch takes out of your files, kept so it can be put back: ``~/.memsearch/backups/``.

Why: the markdown is the truth, and a hand-written note is a person's own. ``forget`` of a note's
section, ``forget --secret`` and ``scan --redact`` rewrite such files; a wrong guess (a query that
found the wrong note, a value that also occurs where it should stay) must be undoable, byte for
byte. So before one of them commits, each file it will change is kept here, private (folders 0700,
files 0600), with what, when and why; ``memsearch forget --undo [ID]`` and
``memsearch scan --restore [ID]`` give the files back. Journal entries removed by ``forget`` are
not kept: a forget of a session that leaked a secret must really remove it.

A kept file may not hold a value that was forgotten. ``forget --secret`` keeps a note as it is
after the change, the label where the value was, and records each place as a *hole*: its offset, the
form the value had there (as written, or escaped inside a JSON string), and a salted scrypt hash of
the value. Only the value given again fills the holes (``--secret``), and only if it hashes the
same. A later ``forget --secret`` turns the places where an older backup holds its value into holes
too, so no file under ``~/.memsearch`` holds a forgotten value.

Layout of one backup, ``<id>/`` (ids sort by creation):

- ``record.json``: ``{"id", "command", "what", "created", "files": [{"path", "blob"}]}``; the backup
  exists once this file does. ``record.pending`` is the same record while the change it keeps is
  not yet committed (``locks/<id>.lock`` held by the process making it, taken before the folder
  exists); completing that change publishes it, and one nobody completes is removed.
- ``<n>.blob``: one JSON header line (the path; the size and sha256 of what the file held right
  after the change; the holes and their hashes; whether it was indexed), then the bytes a restore
  writes back.
- ``restoring.json`` (and ``<n>.filled`` for a blob with holes): a restore under way. Once it is
  written the restore is committed; a process killed after that is completed by the next
  ``forget``, ``index`` or ``scan`` (:func:`recover_restores`), and the backup goes.

Restoring refuses a file changed since in a way that makes it unsafe (one `Error:` line naming it;
nothing is changed); a file that only grew at its end (a journal appended to) gets its original
back with the new tail kept. ``--force`` restores anyway, and keeps what it overwrote as a new
backup. Retention: a backup older than :data:`KEEP_DAYS` days, or beyond the :data:`KEEP_COUNT`
newest, is deleted when the next one is made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KEEP_COUNT",
    "KEEP_DAYS",
    "Backup",
    "KeptFile",
    "Restored",
    "forms",
    "listing",
    "publish",
    "recover_restores",
    "restore",
    "scrub_blob",
    "stage",
    "sweep",
    "verifier",
]

VERSION = 1
#: A backup older than this many days is deleted when the next one is made.
KEEP_DAYS = 30
#: At most this many backups are kept (the newest).
KEEP_COUNT = 50
#: The scrypt cost of a hole's hash: ~50 ms per check, so guessing a short value is slow.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
#: Test-only: ``stage:seconds`` pauses a restore at ``restore-committed`` (as forget's pause).
PAUSE_ENV = "MEMSEARCH_TEST_FORGET_PAUSE"


def forms(value: str) -> list[bytes]:
    """The byte forms a value takes in memsearch's files, in a fixed order (a hole's form index
    points into it): as written (UTF-8), inside a JSON string, and there with ``\\uXXXX`` escapes."""
    return [value.encode("utf-8"), *(json.dumps(value, ensure_ascii=a)[1:-1].encode() for a in (False, True))]


def verifier(value: str) -> dict[str, str]:
    """A salted scrypt hash of ``value`` (what a hole keeps instead of the value)."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(value.encode("utf-8"), salt=salt, **_SCRYPT, dklen=32)
    return {"salt": salt.hex(), "hash": digest.hex()}


def _matches(check: dict[str, str], value: str) -> bool:
    digest = hashlib.scrypt(value.encode("utf-8"), salt=bytes.fromhex(check["salt"]), **_SCRYPT, dklen=32)
    return digest.hex() == check["hash"]


# --- the blob format --------------------------------------------------------------------------


def _blob(header: dict[str, Any], body: bytes) -> bytes:
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body


def _unblob(raw: bytes) -> tuple[dict[str, Any], bytes]:
    line, _, body = raw.partition(b"\n")
    header = json.loads(line)
    if not isinstance(header, dict) or header.get("version") != VERSION:
        raise ValueError("not a memsearch backup of this version")
    return header, body


def scrub_blob(raw: bytes, spans: Sequence[tuple[int, int, Any]], secret: dict[str, str]) -> bytes:
    """A kept file (``raw``: its blob) with the body's ``spans`` (``(start, end, form index)``)
    replaced by ``secret["label"]``, recorded as holes that ``secret``'s hash checks."""
    header, body = _unblob(raw)
    label = secret["label"].encode()
    secrets: list[dict[str, str]] = header.setdefault("secrets", [])
    secrets.append({"salt": secret["salt"], "hash": secret["hash"]})
    index = len(secrets) - 1
    parts, at, shift, new, moves = [], 0, 0, [], [(0, 0)]
    for start, end, form in sorted(spans):
        parts += [body[at:start], label]
        new.append([start + shift, len(label), index, int(form)])
        shift += len(label) - (end - start)
        moves.append((end, shift))  # a place at or after ``end`` moves by ``shift``
        at = end
    parts.append(body[at:])
    old = [[h[0] + max(m for e, m in moves if e <= h[0]), *h[1:]] for h in header.get("holes", [])]
    header["holes"] = sorted(old + new)
    header.pop("body_sha256", None)  # the body now has holes: it is checked by them
    return _blob(header, b"".join(parts))


def _fill(header: dict[str, Any], body: bytes, values: Sequence[str]) -> bytes:
    """The body with its holes filled by the values that match their hashes (SecretNeededError for
    a hole none of ``values`` fills)."""
    from memsearch.errors import SecretNeededError

    found: dict[int, str] = {}
    for index, check in enumerate(header.get("secrets", [])):
        match = next((v for v in values if _matches(check, v)), None)
        if match is None:
            wrong = (
                "none of the values given is the one forgotten there" if values else "the restore needs it"
            )
            raise SecretNeededError(
                f"{header['path']} was kept without a value memsearch forgot; {wrong}",
                hint="give the value again: add `--secret -` and type it (or pipe it on stdin)",
            )
        found[index] = match
    parts, at = [], 0
    for start, length, index, form in sorted(header.get("holes", [])):
        parts += [body[at:start], forms(found[index])[form]]
        at = start + length
    parts.append(body[at:])
    return b"".join(parts)


# --- making a backup --------------------------------------------------------------------------


@dataclass(frozen=True)
class KeptFile:
    """One file to keep: ``body`` is what a restore writes back (with ``holes``, ``(start, end,
    form)`` spans of it that held ``value``, which is not kept), ``after`` what the file holds once
    the change is applied."""

    path: Path
    body: bytes
    after: bytes
    indexed: bool
    holes: Sequence[tuple[int, int, int]] = ()
    value: str | None = None


def _root() -> Path:
    from memsearch import private

    return private.home_dir("backups")


def _new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


class Staged:
    """A backup made before its change is committed: ``record.pending``, its lock held by this
    process until :meth:`close` (see the module docstring)."""

    def __init__(self, backup_id: str, lock_fd: int) -> None:
        self.id = backup_id
        self._lock_fd = lock_fd

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def stage(command: str, what: str, files: Sequence[KeptFile]) -> Staged:
    """Keep ``files`` as a pending backup of ``command`` (``forget``/``scan``); :func:`publish` it
    once the change is committed."""
    from memsearch import private
    from memsearch.files import atomic_write, try_lock

    backup_id = _new_id()
    lock_fd = try_lock(private.private_dir(_root() / "locks") / f"{backup_id}.lock")
    assert lock_fd is not None  # a new id: nobody else can hold it
    folder = _root() / backup_id
    folder.mkdir(mode=0o700)
    entries = []
    for n, kept in enumerate(files):
        header: dict[str, Any] = {
            "version": VERSION,
            "path": str(kept.path),
            "after_size": len(kept.after),
            "after_sha256": hashlib.sha256(kept.after).hexdigest(),
            "indexed": kept.indexed,
        }
        if kept.holes:
            assert kept.value is not None
            header["secrets"] = [verifier(kept.value)]
            header["holes"] = sorted([s, e - s, 0, f] for s, e, f in kept.holes)
        else:
            header["body_sha256"] = hashlib.sha256(kept.body).hexdigest()
        atomic_write(folder / f"{n}.blob", _blob(header, kept.body), private=True, fsync=True)
        entries.append({"path": str(kept.path), "blob": f"{n}.blob"})
    record = {"version": VERSION, "id": backup_id, "command": command, "what": what, "created": time.time()}
    atomic_write(
        folder / "record.pending", json.dumps({**record, "files": entries}), private=True, fsync=True
    )
    return Staged(backup_id, lock_fd)


def publish(backup_id: str) -> None:
    """Make a pending backup a backup (its change was committed); a no-op when it already is or is
    gone. Then apply the retention rule."""
    folder = _root() / backup_id
    with contextlib.suppress(FileNotFoundError):
        os.replace(folder / "record.pending", folder / "record.json")
    _lock(backup_id).unlink(missing_ok=True)
    sweep(None)


def _remove(folder: Path) -> None:
    """Delete a backup folder: renamed aside first (one step), then removed."""
    gone = folder.with_name(f".{folder.name}.deleting")
    with contextlib.suppress(FileNotFoundError):
        os.replace(folder, gone)
    shutil.rmtree(gone, ignore_errors=True)


def _lock(backup_id: str) -> Path:
    return _root() / "locks" / f"{backup_id}.lock"


def _held(backup_id: str) -> bool:
    from memsearch.files import lock_is_held

    try:
        return lock_is_held(_lock(backup_id))
    except OSError:
        return False


def sweep(committed: Callable[[str], bool] | None) -> None:
    """Tidy the backups folder: apply the retention rule, remove a restore's ``.filled`` copies that
    never got committed and, unless ``committed`` is None, the pending backups whose maker is gone
    (their lock is free) and that no committed change names (``committed(id)``, asked then, after
    the lock: a change is committed before its maker lets the lock go). Never raises."""
    from memsearch.config import memsearch_home

    if not (memsearch_home() / "backups").is_dir():
        return
    with contextlib.suppress(OSError):
        root = _root()
        published: list[tuple[float, Path]] = []
        for folder in root.iterdir():
            if folder.name == "locks":
                continue
            if folder.name.endswith(".deleting"):
                shutil.rmtree(folder, ignore_errors=True)  # a removal a killed process left
                continue
            if (folder / "restoring.json").exists() or _held(folder.name):
                continue  # a restore under way (or one recover_restores completes), a change being made
            record = _read_record(folder)
            if record is None:
                abandoned = committed is not None and not committed(folder.name)
                if abandoned and not (folder / "record.json").exists():  # (not published meanwhile)
                    _remove(folder)
                    _lock(folder.name).unlink(missing_ok=True)
                continue
            for stray in folder.glob("*.filled"):
                stray.unlink(missing_ok=True)
            published.append((float(record.get("created", 0)), folder))
        published.sort(reverse=True)
        cutoff = time.time() - KEEP_DAYS * 86400
        for k, (created, folder) in enumerate(published):
            if k >= KEEP_COUNT or created < cutoff:
                _remove(folder)


def _read_record(folder: Path) -> dict[str, Any] | None:
    from memsearch import private

    try:
        data = json.loads(private.read_private(folder / "record.json", limit=1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == VERSION else None


# --- listing and restoring --------------------------------------------------------------------


@dataclass(frozen=True)
class Backup:
    """A backup as listed: its id, the command that made it and what it did, when, its files, and
    how many forgotten values a restore asks for."""

    id: str
    command: str
    what: str
    created: float
    paths: tuple[str, ...]
    values_needed: int = 0


def listing(command: str | None = None) -> list[Backup]:
    """The backups (of ``command``), newest first."""
    from memsearch import private
    from memsearch.config import memsearch_home

    if not (memsearch_home() / "backups").is_dir():
        return []
    found = []
    for folder in _root().iterdir():
        record = _read_record(folder)
        if record is None or (command and record.get("command") != command):
            continue
        needed = 0
        for entry in record["files"]:
            with contextlib.suppress(OSError, ValueError):
                header, _ = _unblob(private.read_private(folder / entry["blob"]))
                needed = max(needed, len(header.get("secrets", [])))
        paths = tuple(str(e["path"]) for e in record["files"])
        found.append(
            Backup(record["id"], record["command"], record["what"], record["created"], paths, needed)
        )
    return sorted(found, key=lambda b: (b.created, b.id), reverse=True)


@dataclass(frozen=True)
class Restored:
    """One file a restore gave back: whether it was indexed, whether a new tail was kept."""

    path: str
    indexed: bool
    tail: bool = False
    overwritten: bool = False


@dataclass(frozen=True)
class _Plan:
    """One file of a backup: its header, and the bytes it restores to."""

    header: dict[str, Any]
    filled: bytes


def _state(plan: _Plan, current: bytes | None) -> str:
    """How the file relates to the backup: "after" (as the change left it, maybe grown at its end),
    "restored" (already given back), or "changed"."""
    if current is None:
        return "changed"
    size = plan.header["after_size"]
    if len(current) >= size and hashlib.sha256(current[:size]).hexdigest() == plan.header["after_sha256"]:
        return "after"
    if current[: len(plan.filled)] == plan.filled:
        return "restored"
    return "changed"


def restore(backup_id: str, values: Sequence[str] = (), *, force: bool = False) -> list[Restored]:
    """Give the files of backup ``backup_id`` back, all or none, and delete the backup. Raises
    BackupNotFoundError, SecretNeededError (a hole ``values`` does not fill), RestoreConflictError
    (a file changed since: nothing is restored unless ``force``, which keeps what it overwrites as
    a new backup first)."""
    from memsearch.errors import RestoreConflictError
    from memsearch.files import atomic_write, locked

    folder, record, plans = _load(backup_id, values)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_restoring(backup_id))
        held = [stack.enter_context(locked(Path(p.header["path"]))) for p in plans]
        currents = [_read(fh) for fh in held]
        changed = [(p, c) for p, c in zip(plans, currents, strict=True) if _state(p, c) == "changed"]
        if changed and not force:
            raise RestoreConflictError(
                f"{', '.join(p.header['path'] for p, _ in changed)} changed since backup {backup_id} "
                "was made (nothing was restored)",
                hint="look at the file; add --force to restore it anyway (what it holds now is kept "
                "as a new backup)",
            )
        overwritten = [
            KeptFile(Path(p.header["path"]), c, p.filled, p.header["indexed"]) for p, c in changed if c
        ]
        if overwritten:  # kept before the restore commits: a crash after it loses nothing
            staged = stage(record["command"], f"overwritten by restoring {backup_id}", overwritten)
            publish(staged.id)
            staged.close()
        entries = []
        for n, plan in enumerate(plans):
            entries.append({"n": n, "force": any(plan is p for p, _ in changed)})
            if plan.header.get("holes"):
                atomic_write(folder / f"{n}.filled", plan.filled, private=True, fsync=True)
        atomic_write(folder / "restoring.json", json.dumps({"files": entries}), private=True, fsync=True)
        _pause("restore-committed")
        done = [_restore_one(folder, p.header, e, fh) for p, e, fh in zip(plans, entries, held, strict=True)]
        _remove(folder)
    return done


@contextlib.contextmanager
def _restoring(backup_id: str) -> Iterator[None]:
    """Hold the backup's lock for a restore: one restore at a time, and no tidying meanwhile."""
    from memsearch import private
    from memsearch.errors import BackupError
    from memsearch.files import try_lock

    fd = try_lock(private.private_dir(_root() / "locks") / f"{backup_id}.lock")
    if fd is None:
        raise BackupError(f"backup {backup_id} is being restored by another process", hint="wait for it")
    try:
        yield
    finally:
        os.close(fd)
        _lock(backup_id).unlink(missing_ok=True)


def _load(backup_id: str, values: Sequence[str]) -> tuple[Path, dict[str, Any], list[_Plan]]:
    """A backup's folder, record and what each of its files restores to (holes filled)."""
    from memsearch import private
    from memsearch.errors import BackupNotFoundError

    folder = _root() / backup_id
    safe = backup_id and "/" not in backup_id and not backup_id.startswith(".")
    record = _read_record(folder) if safe and not (folder / "restoring.json").exists() else None
    if record is None:
        raise BackupNotFoundError(
            f"no backup {backup_id!r}",
            hint="list them: `memsearch forget --undo --list` (or `memsearch scan --restore --list`)",
        )
    plans = []
    for entry in record["files"]:
        header, body = _unblob(private.read_private(folder / entry["blob"]))
        if "body_sha256" in header and hashlib.sha256(body).hexdigest() != header["body_sha256"]:
            raise BackupNotFoundError(f"backup {backup_id} is damaged ({entry['blob']} does not match)")
        plans.append(_Plan(header, _fill(header, body, values) if header.get("holes") else body))
    return folder, record, plans


def _read(fh: Any) -> bytes | None:
    if fh is None:
        return None
    fh.seek(0)
    data: bytes = fh.read()
    return data


def _restore_one(folder: Path, header: dict[str, Any], entry: dict[str, Any], fh: Any) -> Restored:
    """Write one file of a committed restore back (idempotent: see :func:`_state`)."""
    from memsearch import private
    from memsearch.files import atomic_write

    path = header["path"]
    if header.get("holes"):  # its filled copy, written before the restore was committed
        filled = private.read_private(folder / f"{entry['n']}.filled")
    else:
        filled = _unblob(private.read_private(folder / f"{entry['n']}.blob"))[1]
    plan = _Plan(header, filled)
    current = _read(fh)
    state = _state(plan, current)
    tail = b""
    if state == "after":
        tail = current[header["after_size"] :] if current is not None else b""
    elif state == "restored" or not entry.get("force"):
        return Restored(path, bool(header["indexed"]))
    atomic_write(path, filled + tail, keep_mode=True, fsync=True)
    return Restored(path, bool(header["indexed"]), tail=bool(tail), overwritten=state == "changed")


def recover_restores() -> list[Restored]:
    """Complete every restore a killed process committed (``restoring.json``); what they gave back."""
    from memsearch import private
    from memsearch.config import memsearch_home
    from memsearch.errors import BackupError
    from memsearch.files import locked

    if not (memsearch_home() / "backups").is_dir():
        return []
    done: list[Restored] = []
    for marker in sorted(_root().glob("*/restoring.json")):
        folder = marker.parent
        try:
            with _restoring(folder.name):  # (a restore still running elsewhere is its own to finish)
                entries = json.loads(private.read_private(marker))["files"]
                for entry in entries:
                    header, _ = _unblob(private.read_private(folder / f"{entry['n']}.blob"))
                    with locked(Path(header["path"])) as fh:
                        done.append(_restore_one(folder, header, entry, fh))
                _remove(folder)
        except (BackupError, OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: left for the user to look at, never guessed at
    return done


def _pause(stage_name: str) -> None:
    import sys

    wanted, _, seconds = os.environ.get(PAUSE_ENV, "").partition(":")
    if wanted == stage_name:
        print(f"memsearch: test pause at {stage_name}", file=sys.stderr, flush=True)
        time.sleep(float(seconds or 60))
