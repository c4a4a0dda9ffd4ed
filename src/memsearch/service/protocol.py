"""The memory service's wire protocol: one JSON object per line, both ways, and its limits.

A request is ``{"op": ..., "settings": {...}, "args": {...}}``; the reply is ``{"ok": true,
"result": ...}`` or ``{"ok": false, "error": {"type", "message", "hint", "exit_code"}}``, preceded by
``{"alive": true}`` lines once a second while the work runs (so a client can tell a busy service
from a stopped one). Several requests may be sent on one connection; each gets its reply, in order.
Errors cross by class name (every class lives in ``memsearch.errors``), so exit codes and messages
are the same as when the command runs directly. Whatever a peer sends is outside data: it is
decoded defensively (:func:`decode_message`) and checked against the operations' table
(``memsearch.engine.operations``) before the store is touched. Standard library only (the client uses it).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from typing import Any

from memsearch import errors
from memsearch.callerenv import checked
from memsearch.engine.operations import BY_WIRE, MAX_CONTEXT_LINES, MAX_QUERY_CHARS, MAX_TOP_K
from memsearch.errors import InvalidArgumentError, MemSearchError, ServiceError, ServiceRequestError

__all__ = ["MAX_CONTEXT_LINES", "MAX_QUERY_CHARS", "MAX_REQUEST_BYTES", "MAX_TOP_K", "parse_request"]

# Limits: whatever a client sends, one request costs the service bounded memory and time.
#: A request line longer than this is refused before more of it is read (a search is ~1 KB).
MAX_REQUEST_BYTES = 1 << 20


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a connected Unix socket, where the platform
    tells (Linux ``SO_PEERCRED``); None elsewhere."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    size = struct.calcsize("3i")
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    return pid, uid


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


class RequestTooLarge(Exception):
    """A request line grew past :data:`MAX_REQUEST_BYTES` (what was read of it is dropped)."""


class Lines:
    """Reads newline-terminated messages from a socket, keeping what follows for the next call.

    ``limit`` bounds a line (None: unbounded, for the client reading the service's answers);
    ``deadline`` (seconds) bounds the wait for a whole line, not just each ``recv``.
    """

    def __init__(self, sock: socket.socket, limit: int | None = None) -> None:
        self.sock = sock
        self.limit = limit
        self.buf = bytearray()

    @property
    def pending(self) -> bool:
        return bool(self.buf.strip())

    def next_line(self, deadline: float | None = None) -> bytes | None:
        """The next line (without its newline); at end of stream what is left, or None."""
        until = None if deadline is None else time.monotonic() + deadline
        start = 0
        while True:
            nl = self.buf.find(b"\n", start)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                return line
            start = len(self.buf)
            size = 65536
            if self.limit is not None:
                if len(self.buf) > self.limit:
                    self.buf.clear()
                    raise RequestTooLarge
                size = min(size, self.limit + 1 - len(self.buf))
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
            part = self.sock.recv(size)
            if not part:
                if self.buf.strip():
                    line = bytes(self.buf)
                    self.buf.clear()
                    return line
                return None
            self.buf += part


def error_payload(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MemSearchError):
        return {
            "type": type(exc).__name__,
            "message": exc.message,
            "hint": exc.hint,
            "exit_code": errors.exit_code_for(exc),
        }
    return {
        "type": "ServiceError",
        "message": f"the memsearch service failed: {type(exc).__name__}: {exc}",
        "hint": "see the service's output for details",
        "exit_code": 1,
    }


def decode_message(line: bytes) -> dict[str, Any] | None:
    """One protocol line as a JSON object, or None for anything else (not JSON, not UTF-8, nested
    past the parser's depth, not an object): what a peer sends is outside data."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def error_from_payload(payload: Any) -> MemSearchError:
    """Rebuild the service's error as the same class here (so exit codes and messages match); a
    malformed payload becomes a generic ServiceError rather than a crash."""
    if not isinstance(payload, dict):
        payload = {}
    cls = getattr(errors, str(payload.get("type")), None)
    message = str(payload.get("message", "the memsearch service failed"))
    hint = str(payload.get("hint", ""))
    if isinstance(cls, type) and issubclass(cls, MemSearchError):
        with contextlib.suppress(TypeError):
            return cls(message, hint)
    exc = ServiceError(message, hint)
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        exc.exit_code = int(payload.get("exit_code", 1))
    return exc


def too_large() -> ServiceRequestError:
    return ServiceRequestError(
        f"request larger than {MAX_REQUEST_BYTES:,} bytes; the memory service refused it",
        hint="shorten the query or text, or set MEMSEARCH_NO_SERVICE=1 to run it directly",
    )


#: The service's own requests, beside the memory's operations (``memsearch.engine.operations``, by their
#: request name): op -> {argument: its types}. ``stop`` stops as if idle (``memsearch service stop``,
#: the cap on services started on demand), with ``watches`` its watch sessions too (``--all``); a
#: program's own service refuses.
SERVICE_ARGS: dict[str, dict[str, tuple[type, ...]]] = {
    "ping": {},
    "stop": {"watches": (bool,)},
    "watch": {"debounce_ms": (int, type(None))},
}


def parse_request(line: bytes) -> dict[str, Any]:
    """A request line as ``{"op", "settings", "args", "env"}``, checked against the operations'
    table; ServiceRequestError says what is wrong (and the connection stays usable). ``env`` is
    the caller's credential variables (``memsearch.callerenv``; none when it sent none)."""

    def bad(why: str) -> ServiceRequestError:
        return ServiceRequestError(
            f"not a valid memsearch service request: {why}",
            hint='send one JSON object per line: {"op": ..., "settings": {...}, "args": {...}}',
        )

    try:
        request = json.loads(line)
    except UnicodeDecodeError:
        raise bad("it is not UTF-8 text") from None
    except ValueError as exc:
        raise bad(f"invalid JSON ({exc})") from None
    except RecursionError:
        raise bad("JSON nested too deeply") from None
    if not isinstance(request, dict):
        raise bad(f"a JSON {type(request).__name__}, not an object")
    op = request.get("op")
    if not isinstance(op, str) or (op not in BY_WIRE and op not in SERVICE_ARGS):
        raise bad(f"unknown operation {op!r}")
    settings = request.get("settings") or {}
    args = request.get("args") or {}
    if not isinstance(settings, dict) or not isinstance(args, dict):
        raise bad("'settings' and 'args' must be objects")
    env = checked(request.get("env") or {})
    if env is None:
        raise bad("'env' must map variable names of memsearch's providers to strings")
    paths = settings.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise bad("'settings.paths' must be a list of strings")
    try:
        if op in BY_WIRE:
            BY_WIRE[op].check_request(args)
        else:
            for name, value in args.items():
                types = SERVICE_ARGS[op].get(name)
                if (
                    types is None
                    or not isinstance(value, types)
                    or isinstance(value, bool) != (bool in types)
                ):
                    raise InvalidArgumentError(
                        f"argument {name!r} of {op!r} is unknown or has the wrong type"
                    )
    except InvalidArgumentError as exc:
        raise bad(exc.message) from None
    if op in BY_WIRE:
        try:  # the same checks as the call's own (``Operation.bind``), as the service's refusal
            BY_WIRE[op].check_values(args)
        except InvalidArgumentError as exc:
            raise ServiceRequestError(exc.message, exc.hint) from None
    return {"op": op, "settings": settings, "args": args, "env": env}
