"""A failed tool call as the model reads it: one ``Error: ...`` line with a hint, as the CLI prints.

Why: the MCP SDK answers a call whose arguments do not fit the tool's schema with pydantic's own
report (``1 validation error for searchArguments ... For further information visit
https://errors.pydantic.dev/...``), and prefixes every failure with ``Error executing tool
<name>:``. A model acts on the first words it reads; this module gives it what was wrong with which
argument, what it sent (clipped), and the argument's own description as the hint. The server
(``memsearch.mcp.server``) passes every anticipated failure through :func:`failure_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

__all__ = ["failure_text"]

#: The most characters of a rejected value repeated back (a 10 MB query must not come back whole).
MAX_SHOWN = 60


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) > MAX_SHOWN:
        return repr(value[:MAX_SHOWN]) + f"… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def _invalid_arguments(tool: str, error: ValidationError, schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties") or {}
    problems: list[str] = []
    hints: dict[str, None] = {}
    for item in error.errors():
        loc = item.get("loc") or ()
        field = ".".join(str(part) for part in loc) or "arguments"
        message = str(item.get("msg", "invalid"))
        message = message[:1].lower() + message[1:]
        got = "" if item.get("type") == "missing" else f" (got {_shown(item.get('input'))})"
        problems.append(f"{field}: {message}{got}")
        described = properties.get(str(loc[0]), {}) if loc else {}
        if isinstance(described, dict) and described.get("description"):
            hints[f"{field}: {described['description']}"] = None
    hint = "; ".join(hints) or "see the tool's input schema"
    return f"Error: {tool}: {'; '.join(problems)}. Hint: {hint}"


def failure_text(tool: str, exc: ToolError, schemas: Mapping[str, Mapping[str, Any]]) -> str:
    """The one line a failed call of ``tool`` answers; ``schemas``: tool name -> its input schema."""
    cause = exc.__cause__
    if tool not in schemas:
        return f"Error: there is no tool named {_shown(tool)}. Hint: the tools are {', '.join(schemas)}"
    if isinstance(cause, ValidationError):
        return _invalid_arguments(tool, cause, schemas[tool])
    if isinstance(cause, ToolError):  # raised by the tool itself: already its one Error: line
        return str(cause)
    return str(exc)
