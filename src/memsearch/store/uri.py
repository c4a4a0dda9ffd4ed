"""What a ``milvus.uri`` names: a Milvus Lite directory on this machine, or a Milvus server.

Kept apart from ``memsearch.store`` because the memory service's clients need a store's identity (to find
its socket) on every routed call, and must not pay for importing the store package for that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memsearch.config.schema import SERVER_URI_PREFIXES

#: URI prefix -> kind of store (the setting's rule: memsearch.config.schema). Anything that matches
#: no prefix is a Milvus Lite path.
URI_KINDS = dict.fromkeys(SERVER_URI_PREFIXES, "server")
SERVER_PREFIXES = ", ".join(URI_KINDS)


@dataclass(frozen=True)
class StoreLocation:
    """Where a store lives: ``kind`` is ``"lite"`` or ``"server"``.

    ``uri`` is what pymilvus gets; ``display`` is safe to print (credentials redacted); ``path``
    is the Lite database directory (resolved, absolute) or ``None``.
    """

    kind: str
    uri: str
    display: str
    path: Path | None = None

    @property
    def is_local(self) -> bool:
        return self.kind == "lite"


def resolve_uri(uri: str) -> StoreLocation:
    """Classify ``uri`` by scheme; a non-URI is a Lite path (``~`` expanded, resolved against CWD)."""
    text = uri.strip()
    lowered = text.lower()
    for prefix, kind in URI_KINDS.items():
        if lowered.startswith(prefix):
            return StoreLocation(kind=kind, uri=text, display=redact(text))
    path = Path(text).expanduser().resolve()
    return StoreLocation(kind="lite", uri=str(path), display=str(path), path=path)


def redact(uri: str) -> str:
    """``uri`` with any ``user:password@`` replaced, for messages."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri
    if "@" not in parts.netloc:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))
