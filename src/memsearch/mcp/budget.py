"""How much a tool may take in and hand back.

A model's context is the scarce resource: a search answers with short snippets and the chunk
hashes to ``expand``, and every result is held to one character budget (``--max-result-chars``,
small by default) with a last line saying what was left out and which call gets it. Inputs are
bounded too, so a 10 MB query or a ``top_k`` of a billion is refused as a tool error before it
costs anything (the schema says so, and the SDK checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_RESULT_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_PATH_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "MIN_RESULT_CHARS",
    "Budget",
]

#: Characters of text one tool result may hold, by default (about 1,500 tokens).
DEFAULT_RESULT_CHARS = 6000
#: The smallest budget accepted: below it not even one hit and its hint fit.
MIN_RESULT_CHARS = 1000
#: The longest query accepted (a query is a few words; its embedding sees 256 tokens at most).
MAX_QUERY_CHARS = 2000
#: The most hits one search may ask for (a model needs a handful; more is what expand is for).
MAX_TOP_K = 50
#: The longest note ``remember`` writes (a journal bullet is clipped far earlier).
MAX_NOTE_CHARS = 8000
#: The longest path ``transcript`` accepts.
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class Budget:
    """The result budget of one server, and the snippet size of a search hit."""

    result_chars: int = DEFAULT_RESULT_CHARS
    snippet_chars: int = 300

    def clip(self, text: str, limit: int | None = None) -> tuple[str, int]:
        """``text`` cut to ``limit`` characters (default: the result budget), at a line end where
        one is near, and how many characters were left out (0: all of it fits). Text is cut before
        it is framed, so the note saying what was left out stays outside the frame."""
        limit = self.result_chars if limit is None else max(limit, 0)
        if len(text) <= limit:
            return text, 0
        head = text[:limit]
        line_end = head.rfind("\n")
        kept = head[:line_end] if line_end > limit // 2 else head
        return kept, len(text) - len(kept)

    def snippet(self, text: str) -> str:
        """The start of a hit's text, on few lines, cut at a word where possible."""
        flat = " ".join(text.split())
        if len(flat) <= self.snippet_chars:
            return flat
        cut = flat[: self.snippet_chars].rsplit(" ", 1)[0] or flat[: self.snippet_chars]
        return cut + " …"
