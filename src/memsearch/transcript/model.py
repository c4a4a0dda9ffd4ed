"""The transcript model — a turn, its tool calls, what a read found — and picking turns by id.

Every format module produces these; the renderers and the agent hooks consume them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsearch.errors import TurnNotFoundError

__all__ = ["ToolCall", "Transcript", "Turn", "find_turn", "last_turn", "select_turns"]


@dataclass
class ToolCall:
    """One tool invocation: its name, its input rendered as one string, and its clipped output."""

    name: str
    command: str
    output: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "command": self.command, "output": self.output}


@dataclass
class Turn:
    """One message of the conversation: a user prompt or one assistant response.

    ``uuid`` is the id ``--turn`` matches (the entry's own id; for Codex a stable derived id, see
    :func:`memsearch.transcript.codex.parse_codex`). ``aliases`` holds the ids of further entries
    merged into this turn (Claude Code writes one entry per content block of a response), so an id
    copied from any of them works.
    """

    role: str
    uuid: str = ""
    text: str = ""
    tools: list[ToolCall] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The original's JSON shape: ``{role, uuid, text, tools: [{name, command, output}]}``."""
        return {
            "role": self.role,
            "uuid": self.uuid,
            "text": self.text,
            "tools": [t.to_dict() for t in self.tools],
        }

    def ids(self) -> list[str]:
        return [i for i in (self.uuid, *self.aliases) if i]


@dataclass
class Transcript:
    """What :func:`read_transcript` found: the format, the turns, and what was skipped on the way."""

    path: Path
    format: str | None  # None for an empty file
    turns: list[Turn]
    warnings: list[str] = field(default_factory=list)
    session: str | None = None  # the OpenCode session shown


# --- selecting ------------------------------------------------------------------------------


def find_turn(turns: Sequence[Turn], turn_id: str) -> int:
    """Index of the turn ``turn_id`` names: exact id, else id prefix, else the original's rule that the
    id starts with the first 8 characters of a turn's id (only for ids that long: for a short id, such
    as DSH's turn numbers, it would take ``13`` for turn ``1``). Raises :class:`TurnNotFoundError`.
    """
    rules: tuple[Callable[[str], bool], ...] = (
        lambda i: i == turn_id,
        lambda i: i.startswith(turn_id),
        lambda i: len(i) >= 8 and turn_id.startswith(i[:8]),
    )
    for rule in rules:
        for index, turn in enumerate(turns):
            if any(rule(i) for i in turn.ids()):
                return index
    raise TurnNotFoundError(
        f"no turn matches id {turn_id!r} ({len(turns)} turns in the transcript)",
        "run the command without --turn to see each turn's id after its role, or add --json-output; "
        "a unique prefix of an id is enough",
    )


def select_turns(turns: Sequence[Turn], turn_id: str | None, context: int = 3) -> list[Turn]:
    """The turn ``turn_id`` names with ``context`` turns on each side; all turns when no id is given.

    An id that matches nothing raises :class:`TurnNotFoundError` (the original silently returned
    everything, which hides a typo).
    """
    if not turn_id:
        return list(turns)
    index = find_turn(turns, turn_id)
    context = max(context, 0)
    return list(turns[max(index - context, 0) : index + context + 1])


def last_turn(turns: Sequence[Turn]) -> tuple[Turn | None, list[Turn]]:
    """The last user turn and the assistant turns that follow it: what an agent's Stop hook summarises.

    Returns ``(None, [])`` when there is no user turn (nothing was asked, so there is nothing to
    record). Turn texts are never truncated by the parsers; tool outputs are clipped, so a summariser
    that must not see tool output should use only ``text``.
    """
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role == "user":
            return turns[index], [t for t in turns[index + 1 :] if t.role == "assistant"]
    return None, []
