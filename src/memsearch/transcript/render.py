"""Rendering turns for ``memsearch transcript``: the original's JSON shape, or text within a
character budget that keeps the turns asked for."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from memsearch.transcript.model import ToolCall, Turn

__all__ = ["MAX_RENDER_CHARS", "format_turns", "shown", "turns_to_json"]

#: Budget for a whole text rendering; turns beyond it are left out (and the cut is marked).
MAX_RENDER_CHARS = 12000


def shown(turn: Turn) -> Turn:
    """``turn`` as it may leave memsearch: its text, tool commands and outputs through the exits'
    redaction (a transcript holds whatever was pasted or printed in the session)."""
    from memsearch import exits

    tools = [
        ToolCall(t.name, exits.out(t.command, "transcript"), exits.out(t.output, "transcript"))
        for t in turn.tools
    ]
    return replace(turn, text=exits.out(turn.text, "transcript"), tools=tools)


def turns_to_json(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """The original's ``--json-output`` list: ``{role, uuid, text, tools: [{name, command, output}]}``."""
    return [shown(t).to_dict() for t in turns]


def _indent_rest(text: str, prefix: str) -> str:
    return text.replace("\n", "\n" + prefix)


def _render_turn(turn: Turn, selected: bool) -> str:
    heading = "### User" if turn.role == "user" else "### Assistant"
    if turn.uuid:
        heading += f" ({turn.uuid})"
    if selected:
        heading += " [selected]"
    lines = [heading]
    if turn.text:
        lines.append(turn.text)
    for tool in turn.tools:
        lines.append(f"- $ [{tool.name}] {_indent_rest(tool.command, '    ')}")
        if tool.output:
            lines.append(f"  → {_indent_rest(tool.output, '    ')}")
    return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_turns(
    turns: Sequence[Turn], *, selected: str | None = None, max_chars: int = MAX_RENDER_CHARS
) -> str:
    """Render turns as markdown-ish text: ``### User (id)`` / ``### Assistant (id)``, text, tools.

    A rendering longer than ``max_chars`` keeps what was asked for: the turn whose id is ``selected``
    in full plus as many neighbours as fit, or without a selection the newest turns. Omitted turns are
    counted in a marker line where they were cut. Returns ``""`` for no turns.
    """
    if not turns:
        return ""
    target = next((i for i, t in enumerate(turns) if selected and t.uuid == selected), None)
    blocks = [_render_turn(shown(t), i == target) for i, t in enumerate(turns)]

    def size(i: int) -> int:
        return len(blocks[i]) + 2  # block + blank line separator

    anchor = len(blocks) - 1 if target is None else target
    lo, hi = anchor, anchor
    used = size(anchor)
    clipped_anchor = target is None and used > max_chars
    if target is None:
        while lo > 0 and used + size(lo - 1) <= max_chars:
            lo -= 1
            used += size(lo)
    else:
        grow_lo = grow_hi = True
        while grow_lo or grow_hi:
            if grow_lo:
                if lo > 0 and used + size(lo - 1) <= max_chars:
                    lo -= 1
                    used += size(lo)
                else:
                    grow_lo = False
            if grow_hi:
                if hi < len(blocks) - 1 and used + size(hi + 1) <= max_chars:
                    hi += 1
                    used += size(hi)
                else:
                    grow_hi = False
    kept = blocks[lo : hi + 1]
    if clipped_anchor:
        kept = [kept[0][:max_chars].rstrip() + "\n…[turn truncated]"]
    out: list[str] = []
    if lo > 0:
        out.append(f"…[{_plural(lo, 'earlier turn')} not shown; use --turn ID to see them]")
    out.extend(kept)
    if hi < len(blocks) - 1:
        out.append(f"…[{_plural(len(blocks) - 1 - hi, 'later turn')} not shown]")
    return "\n\n".join(out).strip() + "\n"
