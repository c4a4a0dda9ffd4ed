"""The one door every memory text leaves the console by: the package's exits (``console``).

Journals are redacted when they are written, but a hand-written note, a journal from before
redaction or from the original memsearch, a transcript or a skill candidate may still hold a key
or a private span. So every text a page or a JSON answer shows from memory (entries, hits,
sections, transcripts, diffs, previews, file paths) goes through :func:`shown`, which is
:func:`memsearch.exits.out` at the door ``console``: always on, whatever ``redact.enabled`` says (a
page is an exit like a model's context).
"""

from __future__ import annotations

import functools

from memsearch import exits

__all__ = ["shown"]


def shown(text: str) -> str:
    """``text`` as the console may show it: private spans removed, secrets replaced."""
    if not text:
        return ""
    if len(text) <= _CACHED_CHARS:
        return _short(text)
    return exits.out(text, "console")


#: Texts up to this long (an entry's summary, a session, a path) are remembered once redacted: a
#: page shown again, or updated live, redacts only what is new.
_CACHED_CHARS = 400


@functools.lru_cache(maxsize=20_000)
def _short(text: str) -> str:
    return exits.out(text, "console")
