"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from memsearch.transcript.content import clip, content_text, join_text, render_input
from memsearch.transcript.model import ToolCall, Turn
from memsearch.transcript.source import Source

__all__ = ["is_claude_entry", "parse_claude"]


# Context the harness injects into user messages; not what the user typed.
_INJECTED = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# A slash command the user typed, as Claude Code records it: ``<command-name>/exit</command-name>``
# with ``<command-message>`` and ``<command-args>``; a local command's output comes as its own user
# entry, ``<local-command-stdout>…`` (or ``-stderr``, or a ``-caveat`` note).
_COMMAND = re.compile(
    r"\s*<command-name>(?P<name>.*?)</command-name>\s*"
    r"(?:<command-message>.*?</command-message>\s*)?"
    r"(?:<command-args>(?P<args>.*?)</command-args>\s*)?$",
    re.DOTALL,
)
_LOCAL_OUTPUT = re.compile(r"\s*<local-command-(?:stdout|stderr|caveat)>", re.DOTALL)


def is_claude_entry(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in ("user", "assistant") and "message" in entry


def parse_claude(src: Source) -> list[Turn]:
    """Claude Code session JSONL.

    User entries that carry ``tool_result`` blocks only deliver outputs to the pending tool calls;
    other user entries are prompts (``isMeta`` ones are harness notes and skipped). Claude Code writes
    each content block of one response as its own entry sharing ``message.id``: consecutive such
    entries form one assistant turn. Sidechain (sub-agent) entries are not part of the conversation.

    Slash commands are recorded as user entries too (Claude Code 2.1.197). A local one (``/exit``,
    ``/model``) never reaches the model: it and its ``<local-command-stdout>`` output are dropped.
    A command the model answers (a skill, a custom command) stays, as the line the user typed.
    """
    turns: list[Turn] = []
    commands: set[int] = set()  # ids of the user turns that are slash commands
    pending: dict[str, ToolCall] = {}
    current: Turn | None = None  # the open assistant turn
    current_msg_id: str | None = None
    for _, entry in src.entries:
        kind = entry.get("type")
        message = entry.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, Mapping):
            continue
        if entry.get("isSidechain"):
            continue
        content = message.get("content")
        uuid = str(entry.get("uuid") or "")
        if kind == "user":
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            if results:
                for result in results:
                    call = pending.get(str(result.get("tool_use_id")))
                    if call is not None:
                        out = content_text(result.get("content"))
                        call.output = clip(f"[error] {out}" if result.get("is_error") else out)
                continue
            if entry.get("isMeta"):
                continue
            text = _INJECTED.sub("", content_text(content)).strip()
            if _LOCAL_OUTPUT.match(text):
                continue
            command = _COMMAND.match(text)
            if command:
                text = f"{command['name'].strip()} {(command['args'] or '').strip()}".strip()
            if text:
                turns.append(Turn("user", uuid, text))
                if command:
                    commands.add(id(turns[-1]))
                current, current_msg_id = None, None
            continue
        msg_id = message.get("id")
        if current is not None and msg_id and msg_id == current_msg_id:
            turn = current
            if uuid and uuid != turn.uuid:
                turn.aliases.append(uuid)
        else:
            turn = Turn("assistant", uuid)
            current, current_msg_id = turn, (str(msg_id) if msg_id else None)
            turns.append(turn)
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                turn.text = join_text(turn.text, block)
            elif isinstance(block, Mapping):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    turn.text = join_text(turn.text, block["text"])
                elif block.get("type") == "tool_use":
                    call = ToolCall(str(block.get("name") or "tool"), render_input(block.get("input")))
                    turn.tools.append(call)
                    if block.get("id"):
                        pending[str(block["id"])] = call
    turns = [t for t in turns if t.text or t.tools]
    answered = {id(t) for t, after in itertools.pairwise(turns) if after.role == "assistant"}
    return [t for t in turns if id(t) not in commands or id(t) in answered]
