"""How the CLI writes counts and names into plain text.

Counts agree with their noun ("Indexed 1 chunk."). Names that come from outside (file paths,
headings) are shown escaped: a file name may hold a newline, which would forge an extra line in
a result list or an index report, or a terminal escape sequence. JSON output needs none of this
(its encoder escapes), so only plain-text lines go through :func:`shown`.
"""

from __future__ import annotations

#: Nouns whose plural is not the noun plus "s".
_IRREGULAR: dict[str, str] = {"summary": "summaries"}


def plural(count: int, noun: str) -> str:
    """``"1 chunk"``, ``"0 chunks"``, ``"2 files"``."""
    return f"{count} {noun if count == 1 else _IRREGULAR.get(noun, noun + 's')}"


def shown(name: object) -> str:
    """``name`` as one printable line: each character that is not printable (newline, tab,
    escape, bidi overrides, undecodable bytes) and each backslash written as its Python escape,
    so ``a\\nb`` and a name with a newline stay told apart."""
    text = str(name)
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(
        c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii") for c in text
    )
