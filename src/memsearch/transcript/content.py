"""Rendering pieces of message content shared by the format parsers: a tool's input as one line,
clipped tool output, text blocks and image placeholders."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_OUTPUT_CHARS", "clip", "content_text", "image_placeholder", "join_text", "render_input"]

#: Each tool's output is clipped to this many characters (after stripping), as in the original.
MAX_OUTPUT_CHARS = 200
TRUNCATED = " …[truncated]"


#: Input keys that say what a tool did, in order of preference (camelCase is OpenCode's).
_COMMAND_KEYS = ("command", "cmd", "query", "pattern", "file_path", "filePath", "path", "url")


def render_input(value: Any) -> str:
    """A tool's input as one line of intent: the command, query or path if there is one, else JSON."""
    if isinstance(value, Mapping):
        for key in _COMMAND_KEYS:
            v = value.get(key)
            if v:
                return " ".join(str(x) for x in v) if isinstance(v, list) else str(v)
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return " ".join(str(x) for x in value)
    return "" if value is None else str(value)


def clip(text: str) -> str:
    text = text.strip()
    return text[:MAX_OUTPUT_CHARS].rstrip() + TRUNCATED if len(text) > MAX_OUTPUT_CHARS else text


def image_placeholder(block: Mapping[str, Any]) -> str:
    source = block.get("source")
    media = source.get("media_type") if isinstance(source, Mapping) else None
    media = media or block.get("mimeType") or block.get("media_type")
    return f"[image: {media}]" if media else "[image]"


def content_text(content: Any, *, images: bool = True) -> str:
    """Text of a message's content: a string as is; a list → its text blocks (and image placeholders)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif images and kind == "image":
                parts.append(image_placeholder(block))
    return "\n".join(p for p in parts if p)


def join_text(current: str, piece: str) -> str:
    piece = piece.rstrip()
    if not piece:
        return current
    return f"{current}\n{piece}" if current else piece
