"""What a page works with: the request it answers and the reply it makes (the console's vocabulary,
apart from the server so that the pages and the server import it, never each other)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reply", "Request"]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]
    form: dict[str, list[str]] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        """A query (GET) or form (POST) value, "" when absent."""
        if self.method == "POST":
            return (self.form.get(name) or [default])[0]
        return self.query.get(name, default)

    def args(self, name: str) -> list[str]:
        return list(self.form.get(name, []))


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Reply:
        body = json.dumps(data, ensure_ascii=False).encode()
        return cls(status, body, "application/json; charset=utf-8")

    @classmethod
    def redirect(cls, location: str) -> Reply:
        return cls(303, b"", headers={"Location": location})
