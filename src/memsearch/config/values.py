"""What a setting's value must be beyond its type: a name from the table that owns the names, an
address of the shape its owner opens.

Why at the moment a value is set (``config set``, ``config init``): a typo such as
``embedding.provider = onxx`` or ``milvus.uri = notadb`` was written without a word, and every
later command then failed. Each row asks the one table or rule the value's user asks too (the
embedding registry, imported only when the key is set; the URI shape the store checks before
any read, :func:`uri_problem`; the redaction modes), so the check and the place that uses the
value can never disagree. An ``env:`` reference is not checked here (its value is read when the
setting is used, where the same rule refuses it).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memsearch.config.schema import LITE_SUFFIX, REDACT_NOTES_MODES, SERVER_URI_PREFIXES
from memsearch.errors import ConfigValueError

__all__ = ["URI_HINT", "VALUE_CHECKS", "check_value", "uri_problem"]


def _one_of(key: str, value: str, names: Iterable[str], what: str) -> None:
    valid = sorted(names)
    if value in valid:
        return
    close = difflib.get_close_matches(value, valid, n=1)
    guess = f"did you mean '{close[0]}'? " if close else ""
    raise ConfigValueError(
        f"Invalid value for '{key}': unknown {what} '{value}'", hint=f"{guess}Use one of: {', '.join(valid)}."
    )


def _embedding_provider(key: str, value: str) -> None:
    from memsearch.embeddings import PROVIDERS  # the registry (docs/architecture.md: config → embeddings)

    _one_of(key, value, PROVIDERS, "embedding provider")


#: What to write instead of a URI :func:`uri_problem` refuses.
URI_HINT = (
    f"Use a path like ~/.memsearch/milvus.db, or a server URI starting with {', '.join(SERVER_URI_PREFIXES)}."
)


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` names no store memsearch can open, or None: the one rule for every way a URI
    comes in (``config set``, a flag, a file, ``MemSearch(milvus_uri=...)``; the store checks it
    before any read, ``memsearch.store.connect``). A Milvus Lite path must end in ``.db``, so a typo
    is refused before it is read as an empty store."""
    text = uri.strip()
    if text.lower().startswith(SERVER_URI_PREFIXES):
        return None
    path = Path(text).expanduser().resolve()
    if path.suffix != LITE_SUFFIX:
        return f"not a Milvus Lite database path: {path} (it must end in {LITE_SUFFIX})"
    return None


def _store_uri(key: str, value: str) -> None:
    problem = uri_problem(value)
    if problem is not None:
        raise ConfigValueError(f"Invalid value for '{key}': {problem}", hint=URI_HINT)


def _redact_mode(key: str, value: str) -> None:
    _one_of(key, value, REDACT_NOTES_MODES, "mode")


#: dotted key -> its check (raises :class:`~memsearch.errors.ConfigValueError` with the valid
#: choices). ``llm.provider`` is not here: it may also name an ``[llm.providers.<name>]`` entry of
#: the same file, which ``memsearch compact`` resolves.
VALUE_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "embedding.provider": _embedding_provider,
    "milvus.uri": _store_uri,
    "redact.notes": _redact_mode,
}


def check_value(key: str, value: Any) -> None:
    """Refuse a value ``key``'s owner cannot use (``key``: canonical dotted; ``value``: converted)."""
    check = VALUE_CHECKS.get(key)
    if check is not None:
        check(key, value)
