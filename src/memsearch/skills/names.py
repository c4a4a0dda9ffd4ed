"""Names and SKILL.md: slugs valid as Agent Skills names, the front matter written and read, and
the version hash (git's blob id, the original memsearch's format)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
import unicodedata

CANDIDATES_DIRNAME = "skill-candidates"
SKILL_FILE = "SKILL.md"
META_FILE = "meta.json"
#: Statuses a candidate can have, in the order ``skills list`` explains them.
#: The Agent Skills limits on ``name`` and ``description`` (hosts reject longer ones).
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024


def slugify(name: str) -> str:
    """A valid Agent Skills name for ``name``: lowercase ASCII letters, digits and single hyphens,
    at most 64 characters. Accents are folded (``Café`` -> ``cafe``); a name with no ASCII letters
    or digits (e.g. Chinese) gets ``skill-`` plus a short hash of it, so two such names never
    collide."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    if not slug:
        digest = hashlib.sha256(name.strip().encode("utf-8")).hexdigest()[:8]
        return f"skill-{digest}"
    return slug[:MAX_NAME_CHARS].rstrip("-")


def _yaml_string(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar: safe for colons, quotes, '#', newlines.
    return json.dumps(text, ensure_ascii=False)


def render_skill_md(slug: str, description: str, body: str) -> str:
    """The SKILL.md text: the two standard front matter fields, then the body."""
    return f"---\nname: {slug}\ndescription: {_yaml_string(description)}\n---\n\n{body.strip()}\n"


def _parse_scalar(value: str) -> str:
    value = value.strip()
    if value.startswith('"'):
        with contextlib.suppress(json.JSONDecodeError):
            decoded = json.loads(value)
            if isinstance(decoded, str):
                return decoded
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``(fields, body)`` of a SKILL.md: the one-line ``key: value`` fields of its front matter
    (nested blocks are skipped) and the markdown after it. Text without front matter is all body."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text.strip()
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        return {}, text.strip()
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key and not key[0].isspace():
            fields[key.strip()] = _parse_scalar(value)
    return fields, "\n".join(lines[end + 1 :]).strip()


def content_hash(data: bytes) -> str:
    """``gitblob:`` + the id git gives ``data`` as a blob (the original memsearch's format)."""
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    return f"gitblob:{blob}"


def same_version(recorded: str, data: bytes) -> bool:
    """Whether ``data`` is the version a recorded hash names."""
    return bool(recorded) and recorded == content_hash(data)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
