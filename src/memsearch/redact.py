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

detect-secrets (Yelp) was measured as the detector: slow to import (it pulls in ``requests`` and
``yaml``) and many times slower through ``scan_line`` with only its regex plugins than this module
(docs/scaling.md), against a hook that runs after every agent turn. Its regex plugins' formats are
covered by :data:`RULES` instead (this module imports ``re`` only).

Counts of what was redacted, by boundary and kind (never a value), are kept in
``~/.memsearch/redactions.json`` for ``memsearch stats``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memsearch.config.schema import REDACT_NOTES_MODES

__all__ = [
    "BOUNDARIES",
    "NOTES_MODES",
    "RULES",
    "Finding",
    "Redaction",
    "Redactor",
    "counts",
    "current",
    "record",
]

#: Where redaction happens; the keys of the counts file.
BOUNDARIES: tuple[str, ...] = (
    "capture", "summary", "index", "query", "maintenance", "skills", "compact", "scan",
)  # fmt: skip
#: What ``memsearch index`` does with a hand-written note holding a secret (``redact.notes``).
NOTES_MODES: tuple[str, ...] = REDACT_NOTES_MODES
#: Turns redaction off when set to a false value (dangerous: see docs/security.md).
ENV_SWITCH = "MEMSEARCH_REDACT"
COUNTS_FILE = "redactions.json"

_I = re.IGNORECASE
_S = re.DOTALL
#: A token must not be glued to more token characters on its left (``task-`` is not ``sk-``).
_L = r"(?<![A-Za-z0-9_-])"
#: ... nor on its right.
_R = r"(?![A-Za-z0-9_-])"
#: Key names of ``.env`` lines and config assignments that hold a secret.
#: (checked on the ``name`` group of the ``env-secret`` row, after :func:`_name_parts`: matching the
#: name first and testing it after is ~10x faster than a regex that looks for these words at every
#: position). A word must be a whole part of the name: ``GITHUB_TOKEN``, ``apiKey``, ``SECRET_KEY_BASE``,
#: but not ``tokenizer`` or ``max_tokens_per_minute``.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|"
    r"CREDENTIALS?|AUTH_?KEY|AUTH_?TOKEN|CLIENT_?SECRET)(?:_|$)"
)
#: Values of such names that are settings, not secrets.
_NOT_SECRET_VALUE = re.compile(r"^(?:\d+|true|false|null|none|required|optional|enabled|disabled)$", re.I)


def _name_parts(name: str) -> str:
    """``authToken`` -> ``AUTH_TOKEN``, ``db.password`` -> ``DB_PASSWORD``: one spelling to test."""
    return re.sub(r"[.-]", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)).upper()


#: A value of such a line: no spaces or quotes, ends at a space, a quote, ``#``, ``;``, ``,`` or EOL.
_VALUE = r"(?P<secret>[^\s\"'`#;,<>()\[\]{}$]{6,})(?=[\s\"'`#;,]|$)"

#: (kind, needles, regex, flags). A row runs only when one of its needles is in the text (a needle
#: in lower case: in the lower-cased text): most text holds no ``sk-`` at all, and a scan it can
#: skip costs nothing. When the regex has a ``secret`` group only that part is replaced (the user
#: name of a URL, the header name, the ``.env`` key stay readable). Earlier rows win overlaps,
#: so specific formats come before generic ones.
RULES: tuple[tuple[str, tuple[str, ...], str, int], ...] = (
    (
        "private-key",
        ("private key",),
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,.-]*)",
        _S,
    ),
    ("anthropic-api-key", ("sk-ant-",), _L + r"sk-ant-[A-Za-z0-9_-]{20,}", 0),
    ("openai-api-key", ("sk-",), _L + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}", 0),
    ("google-api-key", ("aiza",), _L + r"AIza[0-9A-Za-z_-]{35}" + _R, 0),
    ("huggingface-token", ("hf_",), _L + r"hf_[A-Za-z0-9]{30,}" + _R, 0),
    ("stripe-key", ("_live_", "_test_"), _L + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}" + _R, 0),
    ("stripe-webhook-secret", ("whsec_",), _L + r"whsec_[0-9A-Za-z]{24,}" + _R, 0),
    ("slack-token", ("xox",), _L + r"xox[abposre]-[0-9A-Za-z-]{10,}", 0),
    (
        "slack-webhook",
        ("hooks.slack.com",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{10,}",
        0,
    ),
    (
        "discord-webhook",
        ("/api/webhooks/",),
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
        0,
    ),
    ("twilio-api-key", (), r"SK(?<![A-Za-z0-9_-]SK)[0-9a-f]{32}" + _R, 0),
    ("sendgrid-api-key", ("sg.",), _L + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}" + _R, 0),
    ("npm-token", ("npm_",), _L + r"npm_[A-Za-z0-9]{36}" + _R, 0),
    ("pypi-token", ("pypi-",), _L + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}", 0),
    ("digitalocean-token", ("_v1_",), _L + r"do[opr]_v1_[a-f0-9]{64}" + _R, 0),
    ("shopify-token", ("shp",), _L + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _R, 0),
    (
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _L + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})" + _R,
        0,
    ),
    (
        "gitlab-token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-"),
        _L + r"gl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,}" + _R,
        0,
    ),
    ("mailchimp-api-key", ("-us",), _L + r"[0-9a-f]{32}-us[0-9]{1,2}" + _R, 0),
    ("telegram-bot-token", (":AA",), _L + r"[0-9]{8,10}:AA[0-9A-Za-z_-]{33}" + _R, 0),
    (
        "aws-access-key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])",
        0,
    ),
    (
        "aws-secret-key",
        ("secret_access", "secretaccess"),
        r"aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        _I,
    ),
    ("jwt", ("eyj",), _L + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _R, 0),
    ("azure-storage-key", ("accountkey=",), r"AccountKey=(?P<secret>[A-Za-z0-9+/=]{40,})", 0),
    ("url-password", ("://",), r"\b[a-z][a-z0-9+.-]*://[^\s:/@\"'`]*:(?P<secret>[^\s@/\"'`]{3,})@", _I),
    (
        "authorization",
        ("authorization",),
        r"\b(?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Bot|Digest)\s+"
        r"(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
        _I,
    ),
    ("bearer-token", ("bearer",), r"\bBearer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)", 0),
    (
        "connection-string-password",
        ("password", "pwd"),
        r"(?:^|[;\s\"'])(?:Password|Pwd)\s*=\s*(?P<secret>[^;\s\"']{3,})",
        _I,
    ),
    (
        "env-secret",
        ("=", ":"),
        r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]+)[\"']?[ \t]*[=:][ \t]*[\"']?" + _VALUE,
        0,
    ),
)

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", _I | _S)
#: Values that name where a secret comes from instead of being one (``$TOKEN``, ``env:VAR``,
#: ``<your-key>``, ``***``), or an earlier redaction.
_PLACEHOLDER = re.compile(r"^(?:\$|env:|<|\{|%|\*{3}|x{6}|\[REDACTED|os\.environ|process\.env)", _I)


@dataclass(frozen=True)
class Finding:
    """A span of text to take out: a secret (``kind``) or a private span (kind ``private``)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Redaction:
    """Redacted text and how many items of each kind were taken out."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


Rule = tuple[str, tuple[str, ...], re.Pattern[str]]


def _compile(rules: Iterable[tuple[str, tuple[str, ...], str, int]]) -> tuple[Rule, ...]:
    return tuple(
        (kind, needles, re.compile(regex, flags | re.MULTILINE)) for kind, needles, regex, flags in rules
    )


_BUILTIN = _compile(RULES)


def _secret_assignment(match: re.Match[str]) -> bool:
    """Whether an ``env-secret`` match assigns a secret: its name names one, its value is no setting."""
    return bool(_SECRET_NAME.search(_name_parts(match.group("name")))) and not _NOT_SECRET_VALUE.match(
        match.group("secret")
    )


class Redactor:
    """The rules of one configuration: the built-in table, extra patterns, allowed values."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        patterns: Iterable[tuple[str, str]] = (),
        allow: Iterable[str] = (),
        notes: str = "redact",
    ) -> None:
        self.enabled = enabled
        self.notes = notes
        self.allow = frozenset(a for a in allow if a)
        # extra patterns first: a user's own format is more specific than the generic rows
        self.rules = _compile((kind, (), regex, 0) for kind, regex in patterns) + _BUILTIN

    def findings(self, text: str, *, secrets: bool = True) -> list[Finding]:
        """The spans to take out of ``text``, in order, never overlapping (only the private spans
        when ``secrets`` is False)."""
        if not self.enabled or not text:
            return []
        lower = text.lower()
        taken: list[Finding] = []
        if "<private>" in lower:
            taken = [Finding("private", m.start(), m.end()) for m in _PRIVATE.finditer(text)]
        for kind, needles, pattern in self.rules if secrets else ():
            if needles and not any(n in (text if n.lower() != n else lower) for n in needles):
                continue
            for match in pattern.finditer(text):
                if "name" in pattern.groupindex and not _secret_assignment(match):
                    continue
                has_secret = "secret" in pattern.groupindex and match.group("secret") is not None
                start, end = match.span("secret") if has_secret else match.span()
                value = text[start:end]
                if value in self.allow or _PLACEHOLDER.match(value):
                    continue
                if any(f.start < end and start < f.end for f in taken):
                    continue
                taken.append(Finding(kind, start, end))
        return sorted(taken, key=lambda f: f.start)

    def redact(self, text: str, *, secrets: bool = True) -> Redaction:
        """``text`` with private spans removed and secrets replaced by ``[REDACTED:<kind>]``."""
        found = self.findings(text, secrets=secrets)
        if not found:
            return Redaction(text)
        parts: list[str] = []
        counts: dict[str, int] = {}
        at = 0
        for f in found:
            parts.append(text[at : f.start])
            label = "" if f.kind == "private" else f"[REDACTED:{f.kind}]"
            parts.append(label + "\n" * text.count("\n", f.start, f.end))
            counts[f.kind] = counts.get(f.kind, 0) + 1
            at = f.end
        parts.append(text[at:])
        return Redaction("".join(parts), counts)

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
