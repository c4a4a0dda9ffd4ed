"""Milvus filter expressions built from user data: every value escaped in one helper.

A source path or chunk hash containing ``"`` or ``\\`` can never change the meaning of an expression
built here, and ``source_prefix_filter`` matches on path boundaries with LIKE wildcards escaped.
"""

from __future__ import annotations

import os
import re

from memsearch import errors
from memsearch.store.rows import stored_value, utf8_safe

#: Characters a filter string literal must escape, and how. Other control characters are refused.
_FILTER_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: A character :func:`escape_filter_value` escapes or refuses.
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]')
#: LIKE wildcards and its escape character, escaped for the LIKE matcher (before string escaping).
_LIKE_ESCAPES = {"\\": "\\\\", "%": "\\%", "_": "\\_"}


def filter_problem(value: str) -> str | None:
    """Why ``value`` cannot be written in a filter (see :func:`escape_filter_value`), or None. The
    indexer asks before storing a file, so such a file is skipped instead of failing its run."""
    bad = next((ch for ch in value if ch not in _FILTER_ESCAPES and (ord(ch) < 0x20 or ch == "\x7f")), None)
    return None if bad is None else f"contains the control character U+{ord(bad):04X}"


def escape_filter_value(value: str) -> str:
    """Escape ``value`` for use inside a double-quoted Milvus filter string literal.

    Every filter this package builds from user data goes through here, so a source path or chunk
    hash containing ``"`` or ``\\`` can never change the meaning of the expression. Newline, CR
    and tab become their escape sequences; other control characters are refused, as Milvus string
    literals have no portable escape for them (milvus-lite knows only ``\\n``, ``\\r``, ``\\t``).
    """
    value = utf8_safe(value)
    if not _NEEDS_ESCAPE.search(value):
        return value  # the common case, at a thousand paths per filter of a window of days
    out = []
    for ch in value:
        escaped = _FILTER_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20 or ch == "\x7f":
            raise errors.StoreError(
                f"Cannot filter on a value containing the control character U+{ord(ch):04X}: {value!r}",
                hint="rename the file so its path has no control characters",
            )
        else:
            out.append(ch)
    return "".join(out)


def _like_escape(value: str) -> str:
    """Make ``value`` match itself literally in a LIKE pattern (then string-escape it).

    Milvus unescapes backslashes twice: once reading the string literal, once in the LIKE
    matcher, so a literal ``_`` is written ``\\\\_`` in the expression. Verified on milvus-lite
    (embedded and server); Milvus server handles these escapes since the 2.5/2.6 fixes for
    milvus-io/milvus#43864, so on older servers a prefix containing ``%`` or ``_`` may not match.
    """
    return escape_filter_value("".join(_LIKE_ESCAPES.get(ch, ch) for ch in value))


def source_prefix_filter(prefix: str) -> str:
    """A filter matching ``source`` equal to ``prefix`` or inside it, on path boundaries.

    ``/notes/docs`` matches ``/notes/docs`` and ``/notes/docs/a.md`` but not ``/notes/docs2/b.md``
    (the original matched any string prefix). A trailing separator is ignored; ``/`` matches every
    absolute path; an empty prefix matches everything. The expression is parenthesised so callers
    can combine it with ``and``.
    """
    separators = list(dict.fromkeys(["/", os.sep]))
    stripped = prefix.rstrip("".join(separators))
    if not prefix:
        return 'source like "%"'
    clauses = [f'source == "{escape_filter_value(stripped)}"'] if stripped else []
    for sep in separators:
        literal = stripped + sep
        # milvus-lite evaluates LIKE with pyarrow, whose fast path for "<literal>%" mishandles an
        # escaped backslash (verified with pyarrow 26); "_%" (at least one more character, which
        # every file under a directory has) takes its general path instead.
        tail = "_%" if "\\" in literal else "%"
        clauses.append(f'source like "{_like_escape(literal)}{tail}"')
    return "(" + " or ".join(clauses) + ")"


def content_holds(text: str) -> str:
    """A filter matching chunks whose content contains ``text`` literally (case-sensitive)."""
    return f'content like "%{_like_escape(text)}%"'


def source_equals(source: str) -> str:
    return f'source == "{escape_filter_value(stored_value("source", source))}"'
