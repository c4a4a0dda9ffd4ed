"""LLM text completion for ``compact`` and ``summarize``: one table of backends, one set of errors.

This module owns the provider-type table (:data:`BACKENDS`, with ``openai-compatible`` an alias of
``openai``), how a backend's model, base URL and API key are chosen, the three request shapes, the
settings that ``compact`` and ``summarize`` read from the config (:class:`LLMSettings`), the client
that keeps one connection across requests (:class:`LLMClient`), and the translation of every
failure into an :class:`LLMError`.

- ``openai`` uses the ``openai`` SDK (a core dependency) and so also serves vLLM, Ollama, LM Studio
  and other OpenAI-compatible servers through ``base_url``. No ``temperature`` is sent: reasoning
  models refuse any value but their default.
- ``anthropic`` (Messages API) and ``gemini`` (``generateContent``) are one JSON POST each, made with
  the standard-library client :class:`memsearch.http.JsonClient`, so no vendor SDK is needed and
  ``base_url``/``api_key`` are honoured for every backend (the original ignored them for these two).

Keys and URLs: an explicit value (``env:VAR`` references allowed) wins, then the vendor's usual
environment variable, then the vendor's public endpoint. A key is required only at the vendor's own
endpoint; a custom ``base_url`` (a proxy or a local server) may take none.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memsearch.config import LLM_DEFAULT_MODELS, resolve_env_ref
from memsearch.errors import (
    EmptySummaryError,
    LLMAPIError,
    LLMError,
    MissingLLMKeyError,
    UnknownLLMProviderError,
)
from memsearch.http import (
    SERVER_FAILED_HINT,
    ApiErrors,
    JsonClient,
    OpenAIClients,
    ServiceWording,
    sdk_errors,
)

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig

__all__ = [
    "BACKENDS",
    "DEFAULT_TIMEOUT",
    "PROVIDER_ALIASES",
    "PROVIDER_TYPES",
    "EmptySummaryError",
    "LLMAPIError",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "MissingLLMKeyError",
    "UnknownLLMProviderError",
    "backend_type",
    "complete",
    "summarize_text",
]

#: Seconds to wait for an answer. Generous: a compact of many chunks by a reasoning model can take
#: minutes. Connecting is bounded separately by ``http.CONNECT_TIMEOUT``, so a dead endpoint fails fast.
DEFAULT_TIMEOUT = 300.0
#: The Messages API requires an output limit; this leaves room for a long compact digest.
ANTHROPIC_MAX_TOKENS = 8192
ANTHROPIC_VERSION = "2023-06-01"


# --- errors -------------------------------------------------------------------------------------


#: How LLM endpoints' failures are worded (the REST helper ``JsonClient`` and the openai SDK
#: translation only ask an :class:`ApiErrors` for the exceptions to raise).
LLM_WORDING = ServiceWording(
    kind="LLM",
    error=LLMAPIError,
    missing_key_error=MissingLLMKeyError,
    key_hint="Set {key_env}, or an api_key setting: llm.api_key (--llm-api-key) for compact, "
    "llm.providers.<name>.api_key for summarize; env:VAR references work.",
    unreachable_hint="Check that the server is running and reachable, and the LLM base URL "
    "(--llm-base-url, llm.base_url or llm.providers.<name>.base_url).",
    timeout_hint="Check that the server is healthy; for compact, a smaller --token-budget helps.",
    bad_response_hint="Check that the base URL points at the {label} API.",
    status_hints={
        400: "Check the model name; the prompt may also be too long for the model (lower --token-budget).",
        404: "Check the model name and the base URL: the endpoint or model was not found.",
        413: "The prompt is too large; lower --token-budget.",
        429: "The API is rate-limiting or out of quota; wait and try again.",
        **dict.fromkeys((500, 502, 503, 504), SERVER_FAILED_HINT),
    },
)


def _llm_errors(label: str, key_envs: tuple[str, ...]) -> ApiErrors:
    return ApiErrors(label, key_envs, wording=LLM_WORDING)


# --- the backends -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One completion request, with everything resolved."""

    prompt: str
    model: str
    base_url: str
    api_key: str | None
    errors: ApiErrors
    timeout: float
    transport: _Transport


@dataclass(frozen=True)
class _Transport:
    """The connections of one :class:`LLMClient`: stdlib keep-alive, and the openai SDK's clients."""

    http: JsonClient
    openai: OpenAIClients


@dataclass(frozen=True)
class Backend:
    """One LLM API: how to find its endpoint and key, and how to ask it for text."""

    label: str
    default_base_url: str
    #: Environment variables holding the key, in the order the vendor's SDK reads them.
    key_envs: tuple[str, ...]
    #: Environment variable the vendor's SDK reads a base URL from ("" for none).
    base_url_env: str
    call: Callable[[_Call], Awaitable[str]]


async def _call_openai(call: _Call) -> str:
    client = await call.transport.openai.get()
    url = f"{call.base_url}/chat/completions"
    with sdk_errors(call.errors, url, call.timeout):
        response = await client.chat.completions.create(
            model=call.model, messages=[{"role": "user", "content": call.prompt}]
        )
    if isinstance(response, (str, bytes)):  # the SDK hands back a body it could not decode
        raise call.errors.bad_response(url, f"not JSON ({str(response)[:80]!r})")
    try:
        choices = response.choices or []
        return (choices[0].message.content or "") if choices else ""
    except (AttributeError, TypeError, IndexError) as exc:
        raise call.errors.bad_response(url, f"no message where expected ({exc!r})") from None


async def _post(call: _Call, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return await asyncio.to_thread(
        call.transport.http.post_json, url, body, headers=headers, errors=call.errors, timeout=call.timeout
    )


_VERSION_SUFFIX = re.compile(r"/v\d+[a-z0-9]*$")


def versioned(base_url: str, version: str) -> str:
    """``base_url`` with the API version segment appended unless it already ends in one.

    Accepts both SDK-style roots (``https://api.anthropic.com``) and versioned roots (``.../v1``,
    ``.../v1beta`` as in ``embedding.base_url`` for Gemini), so either form of a proxy URL works.
    """
    return base_url if _VERSION_SUFFIX.search(base_url) else f"{base_url}/{version}"


async def _call_anthropic(call: _Call) -> str:
    url = f"{versioned(call.base_url, 'v1')}/messages"
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if call.api_key:
        headers["x-api-key"] = call.api_key
    body = {
        "model": call.model,
        "max_tokens": ANTHROPIC_MAX_TOKENS,
        "messages": [{"role": "user", "content": call.prompt}],
    }
    payload = await _post(call, url, body, headers)
    blocks = payload.get("content") if isinstance(payload, dict) else None
    if not isinstance(blocks, list):
        raise call.errors.bad_response(url, "no 'content' list in the answer")
    # Thinking and redacted-thinking blocks come before the answer; only text blocks are the reply.
    texts = [
        block["text"]
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    if not texts:
        kinds = ", ".join(str(b.get("type")) for b in blocks if isinstance(b, dict)) or "none"
        raise LLMAPIError(
            f"The Anthropic response contained no text block (blocks: {kinds}; "
            f"stop_reason: {payload.get('stop_reason')}).",
            hint="Try again, or use another model; if the answer was cut off, the model ran out of tokens.",
        )
    return "".join(texts)


async def _call_gemini(call: _Call) -> str:
    model = call.model.removeprefix("models/")
    url = f"{versioned(call.base_url, 'v1beta')}/models/{model}:generateContent"
    # The key travels in a header, never in the URL, so it cannot leak into an error message.
    headers = {"x-goog-api-key": call.api_key} if call.api_key else {}
    body = {"contents": [{"role": "user", "parts": [{"text": call.prompt}]}]}
    payload = await _post(call, url, body, headers)
    if not isinstance(payload, dict):
        raise call.errors.bad_response(url, "the answer is not a JSON object")
    candidates = payload.get("candidates") or []
    if not candidates:
        blocked = (payload.get("promptFeedback") or {}).get("blockReason")
        if blocked:
            raise LLMAPIError(
                f"Gemini refused the prompt (blockReason: {blocked}).",
                hint="The prompt tripped the API's safety filter; try another model or a narrower --source.",
            )
        return ""
    try:
        parts = (candidates[0].get("content") or {}).get("parts") or []
        # Parts flagged as thoughts are the model's reasoning, not its answer.
        return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought"))
    except AttributeError as exc:
        raise call.errors.bad_response(url, f"no parts where expected ({exc!r})") from None


#: provider type -> backend. The one place a type gets its meaning.
BACKENDS: dict[str, Backend] = {
    "openai": Backend(
        "OpenAI", "https://api.openai.com/v1", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", _call_openai
    ),
    "anthropic": Backend(
        "Anthropic",
        "https://api.anthropic.com",
        ("ANTHROPIC_API_KEY",),
        "ANTHROPIC_BASE_URL",
        _call_anthropic,
    ),
    "gemini": Backend(
        "Gemini",
        "https://generativelanguage.googleapis.com",
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        "",
        _call_gemini,
    ),
}
#: Other names accepted for a backend type.
PROVIDER_ALIASES: dict[str, str] = {"openai-compatible": "openai"}
#: Every accepted provider type, in the order error messages list them.
PROVIDER_TYPES: tuple[str, ...] = ("openai", "openai-compatible", "anthropic", "gemini")


def backend_type(provider: str) -> str:
    """The canonical backend type of ``provider`` (``openai-compatible`` → ``openai``)."""
    name = provider.strip().lower()
    name = PROVIDER_ALIASES.get(name, name)
    if name not in BACKENDS:
        raise UnknownLLMProviderError(
            f"Unknown LLM provider type '{provider}'. Available: {', '.join(PROVIDER_TYPES)}",
            hint="Set llm.provider (or --llm-provider, or llm.providers.<name>.type) to one of those.",
        )
    return name


def _env(name: str) -> str:
    return os.environ.get(name, "").strip() if name else ""


def prepare(
    prompt: str, provider: str, model: str | None, base_url: str | None, api_key: str | None, timeout: float
) -> tuple[Backend, _Call]:
    """Resolve everything a request needs, raising every configuration error before any network."""
    kind = backend_type(provider)
    backend = BACKENDS[kind]
    url = resolve_env_ref(base_url or "") or _env(backend.base_url_env) or backend.default_base_url
    url = url.rstrip("/")
    custom = url != backend.default_base_url
    label = f"{backend.label}-compatible" if custom and kind == "openai" else backend.label
    errors = _llm_errors(label, backend.key_envs)
    key = resolve_env_ref(api_key or "") or next(filter(None, map(_env, backend.key_envs)), "")
    if not key and not custom:
        raise errors.missing_key()
    transport = _Transport(JsonClient(), OpenAIClients(key or None, url, timeout))
    return backend, _Call(
        prompt, model or LLM_DEFAULT_MODELS[kind], url, key or None, errors, timeout, transport
    )


class LLMClient:
    """One LLM backend, its settings resolved once, its connection kept between completions.

    Use it as ``async with LLMClient(...) as llm:`` (or call :meth:`aclose` / :meth:`close`) when
    making several requests; :func:`complete` makes one and closes. Configuration errors (unknown
    type, missing key, unset ``env:`` variable) are raised by the constructor, before any network.
    """

    def __init__(
        self,
        provider: str = "openai",
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._backend, self._call = prepare("", provider, model, base_url, api_key, timeout)

    async def complete(self, prompt: str) -> str:
        """Send ``prompt`` as one user message and return the model's text ("" if it gave none)."""
        return await self._backend.call(replace(self._call, prompt=prompt))

    async def aclose(self) -> None:
        self._call.transport.http.close()
        await self._call.transport.openai.aclose()

    def close(self) -> None:
        self._call.transport.http.close()
        self._call.transport.openai.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def complete(
    prompt: str,
    *,
    provider: str = "openai",
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """Send ``prompt`` as one user message and return the model's text ("" if it gave none).

    ``provider`` is a backend type (see :data:`PROVIDER_TYPES`); ``model`` defaults to the backend's
    entry in ``config.LLM_DEFAULT_MODELS``. ``base_url`` and ``api_key`` may be ``env:VAR``
    references. Raises :class:`UnknownLLMProviderError`, :class:`MissingLLMKeyError`,
    :class:`LLMAPIError`, or ``ConfigEnvVarError`` for an unset referenced variable.
    """
    async with LLMClient(provider, model=model, base_url=base_url, api_key=api_key, timeout=timeout) as llm:
        return await llm.complete(prompt)


async def summarize_text(
    prompt: str,
    *,
    llm_provider: str,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> str:
    """The original memsearch's name for :func:`complete` (same arguments, ``llm_provider`` spelled out)."""
    return await complete(prompt, provider=llm_provider, model=model, base_url=base_url, api_key=api_key)


# --- settings from the config -------------------------------------------------------------------


@dataclass(frozen=True)
class LLMSettings:
    """Which LLM to ask: a backend type and optional model, base URL and key (``None`` = default)."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None

    def check(self) -> LLMSettings:
        """Raise now what :meth:`complete` would raise before sending (unknown type, missing key,
        unset ``env:`` variable), so a command fails before it opens the store or reads chunks."""
        prepare("", self.provider, self.model, self.base_url, self.api_key, DEFAULT_TIMEOUT)
        return self

    def client(self, *, timeout: float = DEFAULT_TIMEOUT) -> LLMClient:
        """An :class:`LLMClient` for these settings, to make several requests on one connection."""
        return LLMClient(
            self.provider, model=self.model, base_url=self.base_url, api_key=self.api_key, timeout=timeout
        )

    async def complete(self, prompt: str, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        return await complete(
            prompt,
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=timeout,
        )

    @classmethod
    def named(cls, cfg: MemSearchConfig, name: str) -> LLMSettings:
        """The settings of ``[llm.providers.<name>]`` (its ``env:`` references resolved now).

        The type is the entry's ``type``, else the name itself (so ``[llm.providers.anthropic]``
        needs no ``type``). A name with no entry raises :class:`UnknownLLMProviderError`.
        """
        entry = cfg.llm.providers.get(name)
        if entry is None:
            configured = ", ".join(sorted(cfg.llm.providers)) or "none"
            raise UnknownLLMProviderError(
                f"Unknown LLM provider '{name}'. Configure [llm.providers.{name}].",
                hint=f"Add [llm.providers.{name}] with type, model, base_url and api_key to "
                f"~/.memsearch/config.toml (configured providers: {configured}).",
            )
        resolved = entry.resolved(name)
        return cls(
            resolved.type or name, resolved.model or None, resolved.base_url or None, resolved.api_key or None
        )

    @classmethod
    def for_compact(cls, cfg: MemSearchConfig) -> LLMSettings:
        """The LLM ``compact`` uses: ``[llm]``, falling back to the deprecated ``[compact]`` keys.

        The ``--llm-*`` flags set ``llm.*`` (``memsearch.cli.flags.FLAG_KEYS``), so they beat every file. When
        ``llm.provider`` names an ``[llm.providers.<name>]`` entry, that entry supplies the type,
        model, base URL and key, and non-empty ``llm.model``/``base_url``/``api_key`` override them.
        """
        llm, old = cfg.llm, cfg.compact
        name = llm.provider or old.llm_provider or "openai"
        if name in llm.providers:
            return replace(
                cls.named(cfg, name),
                **{
                    k: v
                    for k, v in (("model", llm.model), ("base_url", llm.base_url), ("api_key", llm.api_key))
                    if v
                },
            )
        return cls(
            name,
            llm.model or old.llm_model or None,
            llm.base_url or old.base_url or None,
            llm.api_key or old.api_key or None,
        )
