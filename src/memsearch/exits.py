"""Memory text on its way out of memsearch: the one redaction every door passes.

Why: redaction at the entrance (:mod:`memsearch.redact`: capture, ``index``) keeps secrets out of
what memsearch writes and stores. But the markdown is the source of truth, and not all of it came in
through memsearch: journals of the original memsearch or of an older version, a line added by hand,
a note, a transcript, an index another tool built. Whatever memsearch hands a model or prints is
read back from those, so every door (:data:`DOORS`) calls :func:`out` with the text it is about to
hand out: ``expand``, search hits, transcripts, the journals and PROJECT.md/USER.md a session starts
with, the MCP resources, ``recent``, the prompts of maintenance and ``compact``, and the recall log.
Error lines are the error tree's (``MemSearchError.one_line`` redacts them).
``tests/test_exits.py`` plants secrets on disk and drives every door with real processes; a door it
does not know fails it.

Always on: ``MEMSEARCH_REDACT=0`` and ``redact.enabled = false`` decide what memsearch *writes* (a
session the user trusts), never what it shows. The raw text stays where its owner can read it: their
own markdown files. ``redact.patterns`` and ``redact.allow`` apply here as everywhere.

Whole files first: a ``<private>`` block or a key block may begin before the part a door shows (a
section of a note, the last lines of a journal), so a door that shows part of a file redacts the whole
file, then cuts. Line numbers do not move: a redaction keeps its newlines.

What was taken out is counted per door, under the boundary ``exit:<door>`` (``memsearch stats``): a
count there means a memory file (or the index) holds a secret, and ``memsearch scan`` says where.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from memsearch.redact import Redactor

__all__ = ["DOORS", "fields", "out", "redactor"]


#: Every door: the name its callers pass to :func:`out`, and what goes out there.
DOORS: dict[str, str] = {
    "search": "search hits, content and heading: CLI, MemSearch/Memory, MCP, prompt auto-inject",
    "expand": "a chunk's section read back from its file: CLI, MemSearch/Memory, MCP",
    "transcript": "conversation turns: CLI text and JSON, the MCP tool",
    "journal": (
        "journals and PROJECT.md/USER.md read for a model: session start of every host, MCP resources, "
        "maintenance prompts"
    ),
    "recent": "`memsearch recent`: each entry's first bullet, each note's title",
    "model": "any text framed for a model (agent.framing.frame)",
    "maintenance": "the prompt a maintenance task sends its model",
    "compact": "the chunks `compact` sends its model",
    "skills": "skill candidates as `memsearch skills list` shows them",
    "recall-log": "a query written to the recall log",
    "console": "every memory text a page or a JSON answer of `memsearch ui` shows (memsearch.console.exits)",
}
#: Not a door of this table: an error line (``MemSearchError.one_line``: ``Error: ...``, an MCP tool
#: error, a hook's log line) is redacted by the error tree itself with the built-in rules, which
#: read no configuration (an error may be about the configuration).


@functools.lru_cache(maxsize=8)
def _built(patterns: tuple[str, ...], allow: tuple[str, ...]) -> Redactor:
    from memsearch.redact import from_settings

    return from_settings(True, "redact", patterns, allow, env={})


def redactor(cfg: Any = None) -> Redactor:
    """The exits' redactor: always on, with ``cfg``'s (default: the resolved configuration's)
    patterns and allowed values; the built-in rules alone when the configuration cannot be read or
    its patterns are invalid (the configuration's own error is reported where it is used)."""
    from memsearch.errors import MemSearchError

    try:
        if cfg is None:
            from memsearch.config import resolve_config

            cfg = resolve_config()
        settings = cfg.redact
        return _built(tuple(settings.patterns), tuple(settings.allow))
    except (MemSearchError, OSError, ValueError, AttributeError):
        return _built((), ())


def out(text: str, door: str, cfg: Any = None, *, fragment: bool = False) -> str:
    """``text`` as it may leave memsearch through ``door`` (a key of :data:`DOORS`): private spans
    out, secrets replaced by ``[REDACTED:<kind>]``. ``fragment``: ``text`` is a piece cut from a
    file (a stored chunk), so a ``</private>`` with nothing open closes a block begun above it
    (:func:`memsearch.redact.private_spans`). Never raises for the text's sake."""
    if door not in DOORS:
        raise KeyError(f"{door!r} is not a door of memsearch.exits.DOORS")
    if not text:
        return text
    result = redactor(cfg).redact(text, fragment=fragment)
    if result.counts:
        from memsearch import redact

        redact.record(f"exit:{door}", result.counts)
    return result.text


def fields(
    row: Mapping[str, Any], door: str, keys: tuple[str, ...] = ("content", "heading"), cfg: Any = None
) -> dict[str, Any]:
    """A copy of ``row`` (a search hit, a stored chunk: a fragment of its file) with its text
    ``keys`` passed through :func:`out`."""
    shown = dict(row)
    for key in keys:
        value = shown.get(key)
        if isinstance(value, str):
            shown[key] = out(value, door, cfg, fragment=True)
    return shown
