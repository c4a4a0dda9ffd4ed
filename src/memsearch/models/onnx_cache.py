"""The saved optimised ONNX graph's folder: sealed with checksums when built, verified when used.

``memsearch.models.onnx_runtime.optimized_copy`` keeps a graph it optimised once under
``~/.memsearch/onnx-optimized/<key>/`` (``model.onnx`` and its ``weights``, ~90 MB) and every later
process loads it instead of the packaged model. A damaged copy that onnxruntime still loads (bytes
overwritten in place, same size) gives wrong vectors, and wrong vectors go into the embedding
cache and the store. So the folder is trusted only when:

- it is a private folder of ours (``memsearch.private``: a real directory, our uid, not a link);
- ``checksums.json`` names the same source graph and the sha256 of each file, recorded when it was
  built, and each file is a regular file of ours that matches.

Hashing the ~90 MB of weights costs ~60 ms (measured: sha256 at ~1.5 GB/s, file in the page cache),
too much to pay in every search, so the record also keeps each file's stamp (size, inode,
modification and change times, the change time being one no write can leave untouched): when the
stamps match, verifying costs three ``stat`` calls (~0.01 ms); when they do not (a write, a copy to
a new disk), the files are hashed once and, if they still match, the new stamps are recorded.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from memsearch import private
from memsearch.errors import PrivatePathError

logger = logging.getLogger("memsearch.onnx")

#: The record of a built folder: its source key and each file's sha256 and stamp.
CHECKSUMS = "checksums.json"
#: The files of a built folder (``weights`` is what onnxruntime names the external data).
FILES = ("model.onnx", "weights")
_CHUNK = 1 << 20


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _sha256(path: Path) -> str:
    """The sha256 of the regular file of ours at ``path`` (never follows a link or blocks)."""
    with os.fdopen(private.open_ours(path), "rb") as fh:
        digest = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def seal(folder: Path, key: str) -> None:
    """Make the just-built ``folder``'s files private (0600) and record their checksums."""
    record: dict[str, Any] = {"key": key, "files": {}}
    for name in FILES:
        path = folder / name
        os.chmod(path, private.FILE_MODE)
        record["files"][name] = {"sha256": _sha256(path), "stamp": _stamp(os.lstat(path))}
    private.write_private(folder / CHECKSUMS, json.dumps(record, indent=1))


def _checked(folder: Path, key: str) -> None:
    """Raise unless ``folder`` holds the files recorded for ``key``, unchanged (see module doc)."""
    record = json.loads(private.read_private(folder / CHECKSUMS, limit=1 << 16))
    if not isinstance(record, dict) or record.get("key") != key:
        raise ValueError(f"{folder / CHECKSUMS} is not the record of this graph")
    restamped = False
    for name in FILES:
        want = record["files"][name]
        st = private.check_file(folder / name)
        if _stamp(st) == want["stamp"]:
            continue
        if st.st_size != want["stamp"][0] or _sha256(folder / name) != want["sha256"]:
            raise ValueError(f"{folder / name} does not match the checksum recorded when it was built")
        want["stamp"] = _stamp(private.check_file(folder / name))
        restamped = True
    if restamped:  # unchanged after all (copied, restored): remember, so the next load only stats
        try:
            private.write_private(folder / CHECKSUMS, json.dumps(record, indent=1))
        except OSError:
            logger.debug("could not update %s", folder / CHECKSUMS, exc_info=True)


def verified(folder: Path, key: str) -> Path | None:
    """``folder``'s graph if the folder is a private one of ours whose files match their record;
    else None, and a folder of ours that does not match is removed (it is rebuilt). A folder that
    is not ours (another user's, a link) is left alone and not used."""
    try:
        problem = private.dir_problem(folder)
    except FileNotFoundError:
        return None
    except OSError:
        logger.warning("memsearch: not using the optimised ONNX graph at %s: cannot look at it", folder)
        return None
    if problem is not None and not problem.startswith("has mode"):
        logger.warning("memsearch: not using the optimised ONNX graph at %s: it %s", folder, problem)
        return None
    try:
        if problem is not None:
            private.private_dir(folder)  # ours, but others could reach it: made private, then checked
        _checked(folder, key)
    except FileNotFoundError:  # half removed, or built before checksums were kept: built again
        logger.debug("optimised graph %s incomplete; rebuilding it", folder)
        discard(folder)
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, PrivatePathError) as exc:
        logger.warning("memsearch: rebuilding the optimised ONNX graph at %s: %s", folder, exc)
        discard(folder)
        return None
    return folder / "model.onnx"


def discard(folder: Path) -> None:
    """Remove ``folder`` if it is a real directory of ours (never through a link, never another's)."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        shutil.rmtree(folder, ignore_errors=True)
