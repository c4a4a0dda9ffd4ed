"""Who may ask the console: the checks every request passes before any page is made.

The console listens on 127.0.0.1 only, where every local user and every web page in the user's
browser can reach it. So:

- **The token.** A request carries the token of ``~/.memsearch/ui-token`` (0600, made once and
  kept, as the MCP HTTP transport's; ``memsearch.private.token``): in the URL ``memsearch ui``
  prints and opens (``?token=``: exchanged at once for an HttpOnly, SameSite=Strict cookie, and
  the address bar is cleared by a redirect), in that cookie, or as ``Authorization: Bearer``. It is
  compared in constant time (``hmac.compare_digest``). No token: 401.
- **Host and Origin.** A page on another site can make the browser resolve its own name to
  127.0.0.1 (DNS rebinding) and would then be same-origin with the console: the ``Host`` header
  must name 127.0.0.1 or localhost at the console's port, and an ``Origin`` (or ``Referer``) that
  a request brings must be the console's own. Otherwise: 403.
- **Writes.** Every change is a POST carrying the CSRF token of this console process (a hidden
  field of each form): a form on another site cannot know it. GET never changes anything.
- **What the browser may do with a page**: :data:`HEADERS`, a Content-Security-Policy that runs
  only the console's own script file (no inline script, no other origin), no framing, no
  referrer to another site, no caching.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

__all__ = ["HEADERS", "TOKEN_FILE", "Guard", "Verdict"]

#: The token's file under ``~/.memsearch``.
TOKEN_FILE = "ui-token"

#: Sent with every answer.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True)
class Verdict:
    """``status`` 0 when the request may go on; otherwise the status and one line saying why."""

    status: int = 0
    reason: str = ""
    #: The request brought the token in its URL: set the cookie and redirect without it.
    login: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 0


@dataclass
class Guard:
    """The checks of one console process listening on ``port``."""

    token: str
    port: int
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def cookie_name(self) -> str:
        """Cookies are kept per host, not per port: one console's cookie never hides another's."""
        return f"memsearch-ui-{self.port}"

    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{host}:{self.port}" for host in ("127.0.0.1", "localhost"))

    def check(self, method: str, headers: Mapping[str, str], query_token: str | None) -> Verdict:
        """The verdict on a request (before its body is read)."""
        host = headers.get("host", "")
        if f"http://{host}" not in self.origins():
            return Verdict(403, f"refused: Host {host!r} is not this console (127.0.0.1:{self.port})")
        origin = headers.get("origin") or _origin_of(headers.get("referer", ""))
        if origin and origin not in self.origins():
            return Verdict(403, f"refused: a request from {origin!r}, another site")
        if headers.get("sec-fetch-site", "") == "cross-site" and method != "GET":
            return Verdict(403, "refused: a cross-site request")
        if query_token is not None and self._same(query_token):
            return Verdict(login=True)
        if self._same(self._bearer(headers)) or self._same(self._cookie(headers)):
            return Verdict()
        return Verdict(401, "missing or wrong token: open the address `memsearch ui` printed")

    def check_csrf(self, given: str | None) -> Verdict:
        if given and hmac.compare_digest(given.encode(), self.csrf.encode()):
            return Verdict()
        return Verdict(403, "refused: the form's CSRF token is missing or stale (reload the page)")

    def set_cookie(self) -> str:
        return f"{self.cookie_name}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def _same(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    @staticmethod
    def _bearer(headers: Mapping[str, str]) -> str:
        value = headers.get("authorization", "")
        return value[7:].strip() if value[:7].lower() == "bearer " else ""

    def _cookie(self, headers: Mapping[str, str]) -> str:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no token
            return ""
        morsel = jar.get(self.cookie_name)
        return morsel.value if morsel is not None else ""


def _origin_of(referer: str) -> str:
    if not referer:
        return ""
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"
