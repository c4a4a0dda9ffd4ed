"""The console's HTTP server: the standard library's threading server on 127.0.0.1, the routes,
the static files, and the one place a failure becomes an answer.

Why the standard library: the console must work with the base install (no extra, no build step),
its load is one person's browser, and the pages are made on the server (reading works without
JavaScript). Every request is checked by :class:`~memsearch.console.guard.Guard` before a route
runs; a route returns a :class:`Reply`. A memsearch error becomes its one ``Error: ...`` line on
the page (or ``{"error": ...}`` for ``/api/``), anything else one line on stderr and a 500.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from memsearch.console.exits import shown
from memsearch.console.guard import HEADERS, Guard
from memsearch.console.html import el, page
from memsearch.console.projects import ALL, Project
from memsearch.console.web import Reply, Request
from memsearch.errors import MemSearchError

__all__ = ["Console", "listen", "serve"]

#: The largest form a POST may send (a forget confirmation lists a few digests).
MAX_FORM_BYTES = 64 * 1024
#: Files served from ``static/`` and their types.
STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}


Route = Callable[["Console", Request], Reply]


class Console:
    """The state of one ``memsearch ui``: its projects, its guard, the flash messages of actions."""

    def __init__(self, projects: list[Project], guard: Guard, *, all_mode: bool) -> None:
        self.projects = {p.key: p for p in projects}
        self.order = [p.key for p in projects]
        self.guard = guard
        self.all_mode = all_mode
        self._flashes: dict[str, tuple[bool, str]] = {}
        self._lock = threading.Lock()

    # -- projects ---------------------------------------------------------------------------

    def selected(self, request: Request) -> list[Project]:
        """The projects a request is about: the one its ``p`` names, every one for ``p=all``
        (``--all``'s default), else the first."""
        key = request.arg("p")
        if key == ALL or (not key and self.all_mode and len(self.order) > 1):
            return [self.projects[k] for k in self.order]
        return [self.projects.get(key) or self.projects[self.order[0]]]

    def one(self, request: Request) -> Project:
        """The one project a page about a single memory works on."""
        return self.projects.get(request.arg("p")) or self.projects[self.order[0]]

    def key_of(self, request: Request) -> str:
        chosen = self.selected(request)
        return ALL if len(chosen) > 1 else chosen[0].key

    def choices(self) -> list[dict[str, Any]]:
        listed = [self.projects[k].describe() for k in self.order]
        if len(listed) > 1:
            listed.insert(0, {"key": ALL, "name": "all projects", "label": "All projects"})
        return listed

    # -- flash messages ---------------------------------------------------------------------

    def flash(self, ok: bool, text: str) -> str:
        import secrets

        key = secrets.token_urlsafe(8)
        with self._lock:
            if len(self._flashes) > 100:
                self._flashes.clear()
            self._flashes[key] = (ok, text)
        return key

    def take_flash(self, key: str) -> tuple[bool, str] | None:
        with self._lock:
            return self._flashes.pop(key, None)

    # -- pages ------------------------------------------------------------------------------

    def render(
        self, request: Request, title: str, body: Any, *, active: str, live: str = "", status: int = 200
    ) -> Reply:
        key = self.key_of(request)
        current = next((c for c in self.choices() if c["key"] == key), self.choices()[0])
        from memsearch.console.inbox_view import waiting_count

        badges = {"/inbox": sum(waiting_count(p) for p in self.selected(request))}
        flash = self.take_flash(request.query.get("done", ""))
        html = page(
            title,
            body,
            active=active,
            project=current,
            projects=self.choices(),
            flash=flash,
            badges=badges,
            live=live,
            csrf=self.guard.csrf,
        )
        return Reply(status, html)

    def error_page(self, request: Request, status: int, text: str) -> Reply:
        if request.path.startswith("/api/"):
            return Reply.json({"error": text}, status)
        return self.render(request, "Error", el("p", text, class_="flash error"), active="", status=status)

    def close(self) -> None:
        for project in self.projects.values():
            project.close()


def _routes() -> dict[tuple[str, str], Route]:
    from memsearch.console import actions, activity_view, inbox_view, memory_view, timeline_view

    table: dict[tuple[str, str], Route] = {
        ("GET", "/"): timeline_view.timeline_page,
        ("GET", "/api/timeline"): timeline_view.timeline_api,
        ("GET", "/api/version"): timeline_view.version_api,
        ("GET", "/search"): memory_view.search_page,
        ("GET", "/api/search"): memory_view.search_api,
        ("GET", "/expand"): memory_view.expand_page,
        ("GET", "/transcript"): memory_view.transcript_page,
        ("GET", "/inbox"): inbox_view.inbox_page,
        ("GET", "/activity"): activity_view.activity_page,
        ("GET", "/api/activity"): activity_view.activity_api,
        ("GET", "/forget"): actions.forget_page,
    }
    for name in actions.ACTIONS:
        table[("POST", f"/act/{name}")] = actions.run_action
    return table


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "memsearch-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._send(Reply(405, b"only GET and POST"))

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per request would bury the URL the person needs

    def _handle(self, method: str) -> None:
        console = self.server.console
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = Request(method, parts.path, query, headers)
        verdict = console.guard.check(method, headers, query.get("token"))
        if not verdict.ok:
            self._send(Reply(verdict.status, f"Error: {verdict.reason}\n".encode(), "text/plain"))
            return
        if verdict.login:  # the token leaves the address bar (and the history) at once
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            reply = Reply.redirect(parts.path + (f"?{rest}" if rest else ""))
            reply.headers["Set-Cookie"] = console.guard.set_cookie()
            self._send(reply)
            return
        if method == "POST":
            form = self._form()
            if form is None:
                self._send(Reply(413, b"Error: the form is too large\n", "text/plain"))
                return
            request.form = form
            csrf = console.guard.check_csrf(request.arg("csrf") or headers.get("x-csrf-token"))
            if not csrf.ok:
                self._send(Reply(csrf.status, f"Error: {csrf.reason}\n".encode(), "text/plain"))
                return
        self._send(self._route(console, request))

    def _form(self) -> dict[str, list[str]] | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_FORM_BYTES:
            self.close_connection = True
            return None
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        return parse_qs(body, keep_blank_values=True)

    def _route(self, console: Console, request: Request) -> Reply:
        if request.method == "GET" and request.path.startswith("/static/"):
            return _static(request.path.removeprefix("/static/"))
        route = self.server.routes.get((request.method, request.path))
        if route is None:
            known = any(path == request.path for _, path in self.server.routes)
            return console.error_page(request, 405 if known else 404, "Error: no such page here")
        try:
            return route(console, request)
        except MemSearchError as exc:
            return console.error_page(request, 400, f"Error: {exc.one_line()}")
        except Exception as exc:  # a bug must not end the console: one line, not a traceback
            print(f"memsearch ui: {request.path}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return console.error_page(
                request, 500, "Error: the console failed on this page (see its terminal)"
            )

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        headers = {**HEADERS, "Content-Type": reply.content_type, **reply.headers}
        headers["Content-Length"] = str(len(reply.body))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)


def _static(name: str) -> Reply:
    kind = STATIC.get(name)
    if kind is None:
        return Reply(404, b"Error: no such file\n", "text/plain")
    data = resources.files("memsearch.console").joinpath("static").joinpath(name).read_bytes()
    return Reply(200, data, kind, {"Cache-Control": "no-cache"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    console: Console
    routes: dict[tuple[str, str], Route]


def listen(port: int | None) -> socket.socket:
    """A socket bound to 127.0.0.1 (loopback only, by construction): ``port``, or the first free
    one of 8765-8784 when none is given (0: any free port)."""
    from memsearch.errors import ConsoleError

    tries = [port] if port is not None else list(range(8765, 8785))
    for number in tries:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", number))
        except OSError as exc:
            sock.close()
            if port is not None:
                raise ConsoleError(
                    f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
                    hint="pick another --port (0: any free one), or stop what is using this one",
                ) from None
            continue
        sock.listen(32)
        return sock
    raise ConsoleError(
        "cannot listen on 127.0.0.1: ports 8765-8784 are all taken", hint="pass --port 0 for any free port"
    )


def _warm(console: Console) -> None:
    """What every page needs, made before the address is printed (the first page is then as quick
    as the next): the redaction rules with the configuration, the timeline's and the inbox's
    modules, each project's review count."""
    import memsearch.agent.timeline
    import memsearch.engine.project_files  # noqa: F401
    from memsearch.console.inbox_view import waiting_count

    shown("warm")
    for project in console.projects.values():
        waiting_count(project)


def serve(console: Console, sock: socket.socket, ready: Callable[[str], None]) -> None:
    """Serve on ``sock`` until SIGINT or SIGTERM; ``ready`` gets the address with the token."""
    import signal

    server = _Server(sock.getsockname(), _Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.console = console
    server.routes = _routes()
    _warm(console)
    host, port = sock.getsockname()[:2]

    def stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    ready(f"http://{host}:{port}/?token={console.guard.token}")
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        console.close()
