"""How remote failures are worded: a domain's :class:`ServiceWording` (noun, error classes,
hints), :class:`ApiErrors` built from it, the API key lookup, and the limits every transport shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from memsearch.callerenv import getenv
from memsearch.errors import MemSearchError

#: How long to wait for a TCP (and TLS) connection: an endpoint that is not there fails fast.
CONNECT_TIMEOUT = 5.0
#: Pause before the single retry of a transient failure (HTTP 429/5xx, reset connection).
RETRY_DELAY = 0.3
#: HTTP 5xx, after the one retry ``JsonClient.post_json`` (and the openai SDK) makes.
SERVER_FAILED_HINT = "The server failed (also on one retry); try again later or check its logs."
#: Sent to OpenAI-compatible servers that take no key (the SDK refuses to run without one).
PLACEHOLDER_KEY = "memsearch-no-key"


# --- wording ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceWording:
    """What kind of service failed, and which settings the hints point at.

    One :class:`ApiErrors` class words every remote service (embeddings, the remote reranker, LLM
    endpoints); what differs between them is collected here: the noun in the messages (``kind``),
    the exception classes raised, and the hints. Templates may use ``{label}`` and ``{key_env}``.
    """

    #: "embedding", "reranking", "LLM": as in "the OpenAI embedding endpoint".
    kind: str
    error: type[MemSearchError]
    missing_key_error: type[MemSearchError]
    key_hint: str
    unreachable_hint: str
    timeout_hint: str
    bad_response_hint: str
    #: HTTP status -> hint, after the service's own ``status_hints``.
    status_hints: Mapping[int, str]


@dataclass(frozen=True)
class ApiErrors:
    """How one service's failures are worded: who failed, and which env var holds its key.

    ``wording`` says what kind of service it is (keyword-only: each domain module has its own,
    e.g. ``embeddings.base.EMBEDDING``), so the same methods word an embedding API, a reranker or
    an LLM endpoint without a copy of this class.
    """

    label: str
    key_envs: tuple[str, ...] = ()
    #: HTTP status -> hint, consulted before the generic hints.
    status_hints: tuple[tuple[int, str], ...] = ()
    wording: ServiceWording = field(kw_only=True)

    @property
    def kind(self) -> str:
        return self.wording.kind

    @property
    def key_env(self) -> str:
        return self.key_envs[0] if self.key_envs else "the provider's API key variable"

    def _fill(self, template: str) -> str:
        return template.format(label=self.label, key_env=self.key_env)

    def key_hint(self) -> str:
        return self._fill(self.wording.key_hint)

    def missing_key(self) -> MemSearchError:
        return self.wording.missing_key_error(
            f"No API key for the {self.label} {self.kind} provider.", self.key_hint()
        )

    def unreachable(self, url: str, reason: object) -> MemSearchError:
        return self.wording.error(
            f"Could not connect to the {self.label} {self.kind} endpoint at {url}: {reason}",
            hint=self._fill(self.wording.unreachable_hint),
        )

    def timed_out(self, url: str, seconds: float) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} did not answer within {seconds:g} s.",
            hint=self._fill(self.wording.timeout_hint),
        )

    def http_status(self, url: str, status: int, body: str) -> MemSearchError:
        if status in (401, 403):
            return self.wording.error(
                f"The {self.label} API rejected the API key (HTTP {status}).", self.key_hint()
            )
        detail = " ".join(body.split())[:300]
        return self.wording.error(
            f"The {self.label} {self.kind} API at {url} returned HTTP {status}"
            + (f": {detail}" if detail else "."),
            hint=dict(self.status_hints).get(status)
            or self._fill(self.wording.status_hints.get(status, "See the message for the server's reason.")),
        )

    def bad_response(self, url: str, detail: str) -> MemSearchError:
        return self.wording.error(
            f"The {self.label} {self.kind} endpoint at {url} sent an unexpected response: {detail}",
            hint=self._fill(self.wording.bad_response_hint),
        )


def resolve_api_key(explicit: str | None, errors: ApiErrors, *, required: bool = True) -> str | None:
    """The explicit key, else the first set env var of ``errors.key_envs``; raise if required."""
    if explicit:
        return explicit
    for name in errors.key_envs:
        value = getenv(name).strip()
        if value:
            return value
    if required:
        raise errors.missing_key()
    return None
