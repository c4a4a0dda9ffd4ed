"""Per-project collection names: ``ms_<sanitised folder name>_<sha8 of the absolute path>``.

The exact algorithm of the original's ``derive-collection.sh``, kept
byte-for-byte compatible so an index built by either tool is found by the other, implemented once
in Python with fixed semantics instead of five shell copies that differed on symlinked paths:

1. absolutise like GNU ``realpath -m`` (relative to the working directory; symlinks of the existing
   prefix resolved; ``.``, ``..`` and a trailing ``/`` normalised; the path need not exist);
2. take the base name, lower-case ASCII letters only, turn every character outside ``[a-z0-9]``
   into ``_``, squeeze runs of ``_``, strip one leading and one trailing ``_``, then cut to 40
   characters (so the cut may leave a trailing ``_``);
3. append the first 8 hex digits of the SHA-256 of the absolute path.
"""

from __future__ import annotations

import hashlib
import os
import re

__all__ = ["MAX_NAME_CHARS", "absolute_path", "derive_collection"]

MAX_NAME_CHARS = 40
_UNSAFE = re.compile(r"[^a-z0-9]")
_RUNS = re.compile(r"_+")
# ``tr '[:upper:]' '[:lower:]'`` changes ASCII letters only; str.lower() would also map e.g. the
# Kelvin sign to "k" and so change the name.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def absolute_path(path: str | os.PathLike[str] | None = None) -> str:
    """``path`` (default: the working directory) as ``realpath -m`` prints it."""
    raw = os.fspath(path) if path is not None and os.fspath(path) != "" else os.getcwd()
    return os.path.realpath(os.path.abspath(os.path.expanduser(raw)))


def _sanitise(name: str) -> str:
    name = _RUNS.sub("_", _UNSAFE.sub("_", name.translate(_ASCII_LOWER)))
    name = name.removeprefix("_").removesuffix("_")
    return name[:MAX_NAME_CHARS]


def derive_collection(path: str | os.PathLike[str] | None = None) -> str:
    """The collection name for the project (or shared memory folder) at ``path``."""
    absolute = absolute_path(path)
    digest = hashlib.sha256(os.fsencode(absolute)).hexdigest()[:8]
    return f"ms_{_sanitise(os.path.basename(absolute))}_{digest}"
