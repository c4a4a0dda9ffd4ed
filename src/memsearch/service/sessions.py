"""A ``memsearch watch`` session at the memory service: index the client's paths, then stream its
watcher's events over the connection for as long as it stays open.

Why a module of its own: it is the one long-lived kind of request, with its own life (the watcher
on the service's engine loop, the session the service ends when it stops), apart from the
one-answer requests of ``server``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.callerenv import as_caller
from memsearch.service.protocol import error_payload, send

if TYPE_CHECKING:
    from memsearch.service.server import MemoryService


def watch_session(service: MemoryService, conn: socket.socket, request: dict[str, Any]) -> None:
    """Serve one ``memsearch watch`` client: index its paths, then stream its watcher's events
    until it hangs up (or the service stops). Watcher updates run on the engine loop."""
    send_lock = threading.Lock()

    def tell(message: dict[str, Any]) -> bool:
        with send_lock:
            try:
                send(conn, message)
            except OSError:
                return False
            return True

    args, env = request["args"], request["env"]
    service._beat.send = lambda: tell({"alive": True})
    try:
        ms = service.instance(request["settings"], env)
        report = service.run(as_caller(env, service._index(ms, False)))
    except Exception as exc:
        tell({"ok": False, "error": error_payload(exc)})
        return
    finally:
        service._beat.send = None
    tell({"ok": True, "result": dataclasses.asdict(report)})
    with service._sessions_lock:
        service._sessions[conn] = tell

    def on_event(kind: str, summary: str, path: Path) -> None:
        tell({"event": kind, "summary": summary, "path": str(path)})

    def on_error(kind: str, exc: BaseException, path: Path) -> None:
        tell({"event": kind, "path": str(path), "error": error_payload(exc)})

    watcher = ms.watch(
        on_event=on_event,
        on_error=on_error,
        debounce_ms=args.get("debounce_ms"),
        runner=lambda work: service.run(as_caller(env, work)),
    )
    tell({"watching": True})
    try:
        while conn.recv(1024):  # the client sends nothing more; EOF means it is gone
            pass
    except OSError:
        pass
    finally:
        watcher.stop()
        with service._sessions_lock:
            service._sessions.pop(conn, None)


#: What a watch's client is told before its session ends when the service was asked to stop with
#: its watches (``memsearch service stop --all``): end, rather than take the store over.
ENDED = {"ended": "the memory service was stopped with its watches (memsearch service stop --all)"}


def end_all(service: MemoryService) -> None:
    """End every watch session: its watcher stops, its client sees the connection close (after
    :data:`ENDED`, when the service's watches are to end with it)."""
    with service._sessions_lock:
        sessions = list(service._sessions.items())
    for conn, tell in sessions:
        if service.ending_watches:
            tell(ENDED)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
