"""Privacy: ``<private>`` spans and secrets taken out of text before it is written, embedded or sent.

Why one seam: a turn passes several boundaries (the summariser's prompt, the journal, the index,
the maintenance model, a drafted skill). A secret missed at one of them is on disk, in a vector
store or in a remote request for good, so every boundary calls :meth:`Redactor.redact` from here,
with the same rules:

- ``<private>…</private>`` (any case, across lines) is removed; an unclosed tag hides everything
  after it, since the writer meant to hide something and we cannot tell where it ends.
- A secret is replaced by a typed placeholder, ``[REDACTED:<kind>]``. The detectors are one table
  (:data:`RULES`) of anchored formats: provider key prefixes, token shapes, key blocks, passwords in
  URLs, ``Authorization`` headers, ``.env`` lines whose key names a secret. There is deliberately no
  entropy heuristic: memory is full of chunk hashes, UUIDs, git SHAs and base64 images, and an
  entropy test cannot tell them from keys.
- Replacements keep the span's newlines, so the line numbers of an indexed note still point at the
  user's file (``expand`` reads it).

What counts as a secret (:data:`RULES`, ``<private>`` parsing) is :mod:`memsearch.detector`'s;
this module adds the configuration (``[redact]``, ``MEMSEARCH_REDACT``), what ``index`` does with a
note, and the counts.

Counts of what was redacted, by boundary and kind (never a value), are kept in
``~/.memsearch/redactions.json`` for ``memsearch stats``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from memsearch.config.schema import REDACT_NOTES_MODES
from memsearch.detector import RULES, Detector, Finding, Redaction, private_spans

__all__ = [
    "BOUNDARIES",
    "NOTES_MODES",
    "RULES",
    "Finding",
    "Redaction",
    "Redactor",
    "counts",
    "current",
    "private_spans",
    "record",
]

#: Where redaction happens; the keys of the counts file (with ``exit:<door>``, what left by a door of
#: :mod:`memsearch.exits`).
BOUNDARIES: tuple[str, ...] = (
    "capture", "summary", "index", "query", "maintenance", "skills", "compact", "scan",
)  # fmt: skip
#: What ``memsearch index`` does with a hand-written note holding a secret (``redact.notes``).
NOTES_MODES: tuple[str, ...] = REDACT_NOTES_MODES
#: Turns redaction off when set to a false value (dangerous: see docs/security.md).
ENV_SWITCH = "MEMSEARCH_REDACT"
COUNTS_FILE = "redactions.json"


class Redactor(Detector):
    """The detector of one configuration, with what ``index`` does with a note holding a secret
    (``notes``) and counting what it takes out (:meth:`text`)."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        patterns: Iterable[tuple[str, str]] = (),
        allow: Iterable[str] = (),
        notes: str = "redact",
    ) -> None:
        super().__init__(enabled=enabled, patterns=patterns, allow=allow)
        self.notes = notes

    def text(self, text: str, boundary: str) -> str:
        """Redact ``text`` and count what was taken out under ``boundary``."""
        result = self.redact(text)
        if result.counts:
            record(boundary, result.counts)
        return result.text


def note_text(redactor: Redactor, text: str, source: str, warnings: list[str]) -> str | None:
    """A note's text as ``index`` chunks it: private spans and secrets out, before anything embeds
    or stores it (so neither the store, its BM25 text nor the embedding cache holds them). With
    ``redact.notes`` = ``warn`` the secrets stay and a warning names the file; with ``skip`` the
    file is left out (None). The file itself is the user's and is never rewritten; line numbers
    still match it, since replacements keep their newlines."""
    result = redactor.redact(text)
    secrets = {k: n for k, n in result.counts.items() if k != "private"}
    if secrets and redactor.notes != "redact":
        kinds = ", ".join(sorted(secrets))
        if redactor.notes == "skip":
            warnings.append(f"skipped {source}: it holds secrets ({kinds}); redact.notes = skip")
            return None
        warnings.append(f"{source}: indexed with the secrets it holds ({kinds}); redact.notes = warn")
        result = redactor.redact(text, secrets=False)
    if result.counts:
        record("index", result.counts)
    return result.text


def _parse_pattern(item: str) -> tuple[str, str]:
    from memsearch.errors import ConfigValueError

    kind, sep, regex = item.partition("=")
    kind = kind.strip()
    if not sep or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", kind) or not regex.strip():
        raise ConfigValueError(
            f"Invalid value in 'redact.patterns': {item!r}",
            hint='Write each pattern as "kind=regex", the kind in lower case: "acme=ACME-[0-9A-F]{32}".',
        )
    try:
        re.compile(regex.strip())
    except re.error as exc:
        raise ConfigValueError(
            f"Invalid regular expression in 'redact.patterns' ({kind}): {exc}", hint="Fix the pattern."
        ) from None
    return kind, regex.strip()


def from_settings(
    enabled: bool,
    notes: str,
    patterns: Iterable[str],
    allow: Iterable[str],
    env: Mapping[str, str] | None = None,
) -> Redactor:
    """A redactor for the ``[redact]`` settings; ``MEMSEARCH_REDACT`` set to a false value wins."""
    from memsearch.config.envvars import env_flag
    from memsearch.errors import ConfigValueError

    if notes not in NOTES_MODES:
        raise ConfigValueError(
            f"Invalid value for 'redact.notes': {notes!r}", hint=f"Use one of: {', '.join(NOTES_MODES)}."
        )
    on = enabled and env_flag(ENV_SWITCH, env, default=True)
    return Redactor(enabled=on, notes=notes, patterns=[_parse_pattern(p) for p in patterns], allow=allow)


def current(cfg: object | None = None, env: Mapping[str, str] | None = None) -> Redactor:
    """The redactor of ``cfg`` (default: the resolved configuration)."""
    if cfg is None:
        from memsearch.config import resolve_config

        cfg = resolve_config()
    r = cfg.redact  # type: ignore[attr-defined]
    return from_settings(r.enabled, r.notes, r.patterns, r.allow, env)


# --- counts -----------------------------------------------------------------------------------


def _counts_path() -> Path:
    from memsearch.private import home

    return home() / COUNTS_FILE


def counts() -> dict[str, dict[str, int]]:
    """Redactions so far by boundary and kind ({} when none or unreadable)."""
    from memsearch.private import read_private

    try:
        data = json.loads(read_private(_counts_path(), limit=1 << 20))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(b): {str(k): int(n) for k, n in kinds.items() if isinstance(n, int)}
        for b, kinds in data.items()
        if isinstance(kinds, dict)
    }


def record(boundary: str, found: Mapping[str, int]) -> None:
    """Add ``found`` to the counts of ``boundary``. Never raises: counting must not stop a capture."""
    if not found:
        return
    from memsearch.errors import MemSearchError

    try:
        from memsearch.files import lock_file
        from memsearch.private import write_private

        path = _counts_path()
        with lock_file(path.with_name(COUNTS_FILE + ".lock")):
            data = counts()
            kinds = data.setdefault(boundary, {})
            for kind, n in found.items():
                kinds[kind] = kinds.get(kind, 0) + n
            write_private(path, json.dumps(data, sort_keys=True, indent=1) + "\n")
    except (OSError, ValueError, MemSearchError):
        pass
