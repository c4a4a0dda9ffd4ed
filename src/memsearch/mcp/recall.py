"""The MCP tools' answers held to the token budget and recorded in the recall log.

Why a wrapper and not edits in each tool: every recall tool (``search``, ``expand``,
``transcript``) needs the same two things after it answered: the answer cut to
``context.recall_tokens`` tokens (:mod:`memsearch.agent.context_budget`; the characters budget,
``--max-result-chars``, still applies first), and one line in the recall log
(:mod:`memsearch.agent.recall_log`) with the query (redacted there) and the hits shown. The wrapper keeps
the tool's signature (``functools.wraps``), which is what the MCP SDK builds the tool's schema from.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsearch.mcp.scope import McpScope

__all__ = ["EVENTS", "logged"]

#: Tool name -> the recall log's event.
EVENTS = {"search": "search", "expand": "expand", "transcript": "expand"}
_HIT = re.compile(r"^\[\d+\] ", re.MULTILINE)


def logged(fn: Callable[..., Awaitable[str]], scope: McpScope) -> Callable[..., Awaitable[str]]:
    """``fn`` (a tool of :data:`EVENTS`) answering within the recall budget, and logged."""
    event = EVENTS[fn.__name__]

    @functools.wraps(fn)
    async def tool(*args: Any, **kwargs: Any) -> str:
        from memsearch.agent import context_budget as cb
        from memsearch.agent import recall_log

        text = await fn(*args, **kwargs)
        cfg = scope.config
        budget = cfg.context.recall_tokens
        if cb.count_tokens(text) > budget:
            more = "a narrower call (fewer hits, section=false)"
            room = budget - cb.count_tokens(cb.left_out_line(99_999, "tokens", more))
            text, cut = cb.clip(text, room)
            text += "\n" + cb.left_out_line(cut, "tokens", more)
        fields: dict[str, Any] = {"via": "mcp", "host": recall_log.caller()[1] or "mcp"}
        if event == "search":
            fields.update(
                query=str(kwargs.get("query", args[0] if args else "")), hits=len(_HIT.findall(text))
            )
        recall_log.record(cfg, scope.collection, event, tokens=cb.count_tokens(text), **fields)
        return text

    return tool
