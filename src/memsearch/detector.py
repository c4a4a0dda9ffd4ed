"""What counts as a secret: the detector redaction runs (``memsearch.redact``, ``memsearch.exits``).

Why a module of its own: it is pure text work (``re`` only, nothing of memsearch), so the error
tree can redact an error line with it (``MemSearchError.one_line``) without the configuration,
the counts or anything else of ``memsearch.redact`` in an import cycle.

- ``<private>…</private>`` (any case, across lines, nested, ``<private reason="…">``) is removed; an
  unclosed tag hides everything after it, since the writer meant to hide something and we cannot
  tell where it ends.
- A secret is replaced by a typed placeholder, ``[REDACTED:<kind>]``. The detectors are one table
  (:data:`RULES`) of anchored formats: provider key prefixes, token shapes, key blocks, passwords in
  URLs, ``Authorization`` headers, ``.env`` lines whose key names a secret. There is deliberately no
  entropy test on a lone token: memory is full of chunk hashes, UUIDs, git SHAs and base64 images,
  and an entropy test cannot tell them from keys.
- Replacements keep the span's newlines, so the line numbers of an indexed note still point at the
  user's file (``expand`` reads it).

Measured against maintained engines (betterleaks, kingfisher, detect-secrets) for recall, false
positives and cost: ``python -m evaluation.secrets`` (docs/security.md has the table).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["RULES", "Detector", "Finding", "Redaction", "private_spans"]

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
#: but not ``tokenizer`` or ``max_tokens_per_minute``. A key need not be ASCII (``DB_PASSWORD_ÄLT``,
#: ``ПАРОЛЬ``); the CJK words stand anywhere in a name (``数据库密码``), as CJK has no word separator.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|"
    r"CREDENTIALS?|AUTH_?KEY|AUTH_?TOKEN|CLIENT_?SECRET|PASSWORT|KENNWORT|CONTRASEÑA|SENHA|"
    r"MOT_DE_PASSE|ПАРОЛЬ)(?:_|$)|密码|口令|密钥|令牌|パスワード|비밀번호"
)
#: Names that are not secrets although a secret word is a part: the shell's working folders, and a
#: secret word followed by what describes the secret rather than being it (``SECRET_NAME``,
#: ``TOKEN_URL``, ``token_endpoint``, ``PRIVATE_KEY_PATH``, ``API_KEY_ID``).
_NOT_SECRET_NAME = re.compile(
    r"^(?:OLD)?PWD$|_(?:NAMES?|URL|URI|ENDPOINT|HOST|PORT|PATH|FILE|DIR|ARN|TYPE|ID|LEN|LENGTH|SIZE|"
    r"EXPIRY|EXPIRES|EXPIRES_IN|EXPIRATION|TTL|HEADER|PARAM|FIELD|PREFIX|ENV|VAR|REF|KIND|MODE|COUNT|"
    r"LIMIT|TIMEOUT|FORMAT|VERSION|POLICY|SCOPES?|ISSUER|AUDIENCE|ALGORITHM|LOCATION|REGION|PROVIDER|"
    r"STORE|MANAGER|ROTATION|HINT|LABEL|DESCRIPTION|ENABLED|REQUIRED|SOURCE|PROMPT|MESSAGE|MSG|TEXT|"
    r"TITLE|PLACEHOLDER|HELP|ERROR|EXAMPLE)$"
)
#: Values of such names that are settings, not secrets.
_NOT_SECRET_VALUE = re.compile(r"^(?:\d+|true|false|null|none|required|optional|enabled|disabled)$", re.I)
#: Values that point at a secret instead of being one: a path (``PWD=/home/…``, a key file), a URL
#: without credentials (a password in one is the ``url-password`` row's), and code that reads it: an
#: attribute, a call or an index (``self.password``, ``get_token(s)``, ``config['secret']``). A value
#: with a digit before its first bracket or dot (``hunter2.old``, ``P4ss(w)``) is a secret all the same.
_POINTER_VALUE = re.compile(
    r"^(?:[/~]|\.\.?/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)"
    r"|^[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+[,;)]?$"
    r"|^[A-Za-z_][A-Za-z_.]{2,}[(\[]"
)
#: A value of letters alone that reads as words (a variable, a type: ``orgsPermission``,
#: ``EventLoopToken``): with as many vowels as words have (a random token's letters have about a
#: fifth).
_WORDS_VALUE = re.compile(r"^[A-Za-z_]+[,;)]?$")


def _name_parts(name: str) -> str:
    """``authToken`` -> ``AUTH_TOKEN``, ``db.password`` -> ``DB_PASSWORD``: one spelling to test."""
    return re.sub(r"[.-]", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)).upper()


#: The value of such a line, after an optional opening quote: quoted, everything up to the same
#: quote on that line (spaces, ``#`` and all); unquoted, the run of printable ASCII up to a space or a
#: quote, whatever it holds (``hunter2$ecure``, ``abc#def``, ``a/b(c)``): a secret is all of it.
_VALUE = r"(?P<quote>[\"'`])?(?P<secret>(?(quote)(?:(?!(?P=quote))[^\n]){6,}(?=(?P=quote))|[!#-&(-_a-~]{6,}))"


def _aws_secret(group: str) -> str:
    """An AWS secret access key as group ``group``: 40 characters of base64 standing alone, with an
    upper-case letter, a lower-case letter and a digit among them."""
    alone = r"[A-Za-z0-9/+=]"
    return (
        rf"(?<!{alone})(?P<{group}>(?=[A-Za-z0-9/+]{{0,39}}[A-Z])(?=[A-Za-z0-9/+]{{0,39}}[a-z])"
        rf"(?=[A-Za-z0-9/+]{{0,39}}[0-9])[A-Za-z0-9/+]{{40}})(?!{alone})"
    )


#: (kind, needles, regex, flags). A row runs only when one of its needles is in the text (a needle
#: in lower case: in the lower-cased text): most text holds no ``sk-`` at all, and a scan it can
#: skip costs nothing. When the regex has a ``secret`` group (or, in another branch, a group named
#: ``secret_…``) only that part is replaced (the user name of a URL, the header name, the ``.env``
#: key stay readable). Earlier rows win overlaps,
#: so specific formats come before generic ones.
RULES: tuple[tuple[str, tuple[str, ...], str, int], ...] = (
    (
        "private-key",
        ("private key",),
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,.-]*)"
        # the body of a block whose BEGIN line is not in the text (a chunk cut inside the block)
        r"|^(?:[A-Za-z0-9+/=]{16,}[ \t]*\r?\n)+-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        _S,
    ),
    ("anthropic-api-key", ("sk-ant-",), _L + r"sk-ant-[A-Za-z0-9_-]{20,}", 0),
    ("openai-api-key", ("sk-",), _L + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}", 0),
    ("google-api-key", ("aiza",), _L + r"AIza[0-9A-Za-z_-]{35}" + _R, 0),
    ("huggingface-token", ("hf_",), _L + r"hf_[A-Za-z0-9]{30,}" + _R, 0),
    ("stripe-key", ("_live_", "_test_"), _L + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}" + _R, 0),
    ("stripe-webhook-secret", ("whsec_",), _L + r"whsec_[0-9A-Za-z]{24,}" + _R, 0),
    ("slack-token", ("xox", "xapp-"), _L + r"(?:xox[abposre]|xapp)-[0-9A-Za-z-]{10,}", 0),
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
    (
        # an AWS secret access key in prose beside its key id (``AKIA… / wJalr…``), either order,
        # up to 200 characters apart: 40 characters of base64 with upper, lower case and a digit
        # (a git SHA is lower-case hex)
        "aws-secret-key",
        ("AKIA", "ASIA"),
        r"(?:AKIA|ASIA)[A-Z0-9]{16}[\s\S]{0,200}?"
        + _aws_secret("secret")
        + r"|"
        + _aws_secret("secret_before")
        + r"(?=[\s\S]{0,200}?(?:AKIA|ASIA)[A-Z0-9]{16})",
        0,
    ),
    ("jwt", ("eyj",), _L + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _R, 0),
    ("azure-storage-key", ("accountkey=",), r"AccountKey=(?P<secret>[A-Za-z0-9+/=]{40,})", _I),
    (
        # the password runs to the last ``@`` before a host: it may hold ``/``, ``#`` or an unencoded ``@``
        "url-password",
        ("://",),
        r"\b[a-z][a-z0-9+.-]*://[^\s:/@\"'`]*:(?P<secret>(?!\d{1,5}(?:/|$))[^\s\"'`]{3,})@[\w.-]*\w",
        _I,
    ),
    (
        "authorization",
        ("authorization",),
        r"\b(?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Bot|Digest)\s+"
        r"(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
        _I,
    ),
    ("bearer-token", ("bearer",), r"\bBearer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)", 0),
    (
        # inside a connection string: after a ``;``, or ended by one (``PWD=/home/…`` is a shell's)
        "connection-string-password",
        ("password", "pwd"),
        r";\s*(?:Password|Pwd)\s*=\s*(?P<secret>[^;\s\"']{3,})"
        r"|(?:^|[\s\"'])(?:Password|Pwd)\s*=\s*(?P<secret_end>[^;\s\"']{3,})(?=;)",
        _I,
    ),
    (
        "env-secret",
        ("=", ":"),
        r"(?<![\w.-])(?P<name>[\w.-]+)[\"']?[ \t]*(?P<sep>[=:：])[ \t]*" + _VALUE,
        0,
    ),
)

#: ``<private>``, ``<private >``, ``<private reason="…">`` and their closing tag, any case.
_PRIVATE_TAG = re.compile(r"<(?P<close>/)?\s*private(?(close)\s*|(?:\s[^<>]*)?)>", _I)
#: Values that name where a secret comes from instead of being one (``$TOKEN``, ``env:VAR``,
#: ``<your-key>``, ``***``), or an earlier redaction.
_PLACEHOLDER = re.compile(
    r"^(?:\$|env:|<|\{|%|\*{3}|x{6}|\[REDACTED|os\.environ|process\.env)"
    r"|^(?:password|passwd|pass|pwd|secret|token|changeme)$",  # a template's word, not a value
    _I,
)


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
    """Whether an ``env-secret`` match assigns a secret: its name names one (and not what describes
    it), its value is no setting and points at nothing (a quoted value is taken as written)."""
    name = _name_parts(match.group("name"))
    if not _SECRET_NAME.search(name) or _NOT_SECRET_NAME.search(name):
        return False
    value = match.group("secret")
    if _NOT_SECRET_VALUE.match(value) or value.rstrip(",;)").lower() == match.group("name").lower():
        return False  # a setting, or code handing a variable on (``api_key=api_key``)
    quote = match.group("quote")
    if quote in ('"', "'"):
        return True
    if not quote and (_POINTER_VALUE.search(value) or _words(value)):
        return False
    # ``key: value and more words`` is prose or a type annotation (``token: EventLoopToken | None``,
    # ``a secret: `redact` (...)``); a YAML value ends its line (a ``#`` comment may follow)
    end = match.end("secret") + len(quote or "")
    line_end = match.string.find("\n", end)
    rest = match.string[end : line_end if line_end >= 0 else None]
    return match.group("sep") == "=" or not rest.strip() or rest.lstrip().startswith("#")


def _words(value: str) -> bool:
    """Whether an unquoted value of letters alone reads as words rather than a random token."""
    if not _WORDS_VALUE.match(value):
        return False
    letters = value.rstrip(",;)")
    return sum(c in "aeiouAEIOU" for c in letters) >= 0.3 * len(letters)


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    """The part of a match to take out: its ``secret``/``secret_…`` group that matched, else all."""
    for name in match.re.groupindex:
        if name.startswith("secret") and match.group(name) is not None:
            return match.span(name)
    return match.span()


_OPENERS = {")": "(", "]": "[", "}": "{"}


def _trim(text: str, start: int, end: int) -> int:
    """The end of an unquoted value without a trailing ``,``/``;`` or closing brackets it did not
    open (``f(token=abc123)``): those belong to the text around it."""
    while end > start:
        last = text[end - 1]
        opener = _OPENERS.get(last)
        unopened = opener is not None and text.count(opener, start, end) < text.count(last, start, end)
        if last not in ",;" and not unopened:
            break
        end -= 1
    return end


def private_spans(text: str, *, fragment: bool = False) -> list[tuple[int, int]]:
    """Where ``<private>`` blocks are, nested ones inside the outermost: from its opening tag to its
    own closing tag (the first ``</private>`` closes only the innermost), or to the end of the text
    when it is never closed. A closing tag with nothing open hides nothing in a whole file; in a
    ``fragment`` (a stored chunk, cut from a file memsearch may not have redacted) it closes a block
    that began before the fragment: everything before it is hidden."""
    spans: list[tuple[int, int]] = []
    depth = start = 0
    for tag in _PRIVATE_TAG.finditer(text):
        if tag.group("close") is None:
            if depth == 0:
                start = tag.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((start, tag.end()))
        elif fragment:
            spans.append((spans[-1][1] if spans else 0, tag.end()))
    if depth:
        spans.append((start, len(text)))
    return spans


class Detector:
    """The rules of one configuration: the built-in table, extra patterns, allowed values."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        patterns: Iterable[tuple[str, str]] = (),
        allow: Iterable[str] = (),
    ) -> None:
        self.enabled = enabled
        self.allow = frozenset(a for a in allow if a)
        # extra patterns first: a user's own format is more specific than the generic rows
        self.rules = _compile((kind, (), regex, 0) for kind, regex in patterns) + _BUILTIN

    def findings(self, text: str, *, secrets: bool = True, fragment: bool = False) -> list[Finding]:
        """The spans to take out of ``text``, in order, never overlapping (only the private spans
        when ``secrets`` is False; ``fragment``: see :func:`private_spans`)."""
        if not self.enabled or not text:
            return []
        lower = text.lower()
        taken: list[Finding] = []
        if "private" in lower:  # an opening or a closing tag
            taken = [Finding("private", start, end) for start, end in private_spans(text, fragment=fragment)]
        for kind, needles, pattern in self.rules if secrets else ():
            if needles and not any(n in (text if n.lower() != n else lower) for n in needles):
                continue
            for match in pattern.finditer(text):
                if "name" in pattern.groupindex and not _secret_assignment(match):
                    continue
                start, end = _secret_span(match)
                if "quote" in pattern.groupindex and not match.group("quote"):
                    end = _trim(text, start, end)
                value = text[start:end]
                if value in self.allow or _PLACEHOLDER.match(value):
                    continue
                if any(f.start < end and start < f.end for f in taken):
                    continue
                taken.append(Finding(kind, start, end))
        return sorted(taken, key=lambda f: f.start)

    def redact(self, text: str, *, secrets: bool = True, fragment: bool = False) -> Redaction:
        """``text`` with private spans removed and secrets replaced by ``[REDACTED:<kind>]``."""
        found = self.findings(text, secrets=secrets, fragment=fragment)
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
