"""The one door every memory text leaves the console by: ``<private>`` spans and secrets out.

Journals are redacted when they are written, but a hand-written note, a journal from before
redaction or from the original memsearch, a transcript or a skill candidate may still hold a key
or a private span. So every text a page or a JSON answer shows from memory (entries, hits,
sections, transcripts, diffs, previews, file paths) goes through :func:`shown`, always with the
secret rules on (as ``memsearch scan`` and ``forget``'s previews do), whatever ``redact.enabled``
says: a page is an exit like a model's context. One function, so the redaction seam of the whole
package can take its place in one line.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsearch.redact import Redactor

__all__ = ["shown"]


@functools.lru_cache(maxsize=1)
def _redactor() -> Redactor:
    from memsearch import redact
    from memsearch.config import resolve_config

    r = resolve_config().redact
    return redact.from_settings(True, r.notes, r.patterns, r.allow, env={})


def shown(text: str) -> str:
    """``text`` as the console may show it: private spans removed, secrets replaced."""
    if not text:
        return ""
    if len(text) <= _CACHED_CHARS:
        return _short(text)
    return _redactor().redact(text).text


#: Texts up to this long (an entry's summary, a session, a path) are remembered once redacted: a
#: page shown again, or updated live, redacts only what is new.
_CACHED_CHARS = 400


@functools.lru_cache(maxsize=20_000)
def _short(text: str) -> str:
    return _redactor().redact(text).text
