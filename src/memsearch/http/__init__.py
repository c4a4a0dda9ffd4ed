"""Talking to remote services: one JSON-over-HTTP helper, the SDK error translation, one wording.

This package owns what every remote caller shares, whatever it asks for (embeddings, an LLM
completion, a rerank): :class:`JsonClient` (a JSON POST on a kept-alive connection, with a short
connect timeout, one deadline per call, at most one quick retry of a transient failure, every
failure turned into a typed error); :func:`openai_client`, :class:`OpenAIClients` (one SDK client
per event loop, kept across calls) and :func:`sdk_errors` (the same for the openai SDK);
:class:`ApiErrors` (the wording of every failure) and :func:`resolve_api_key`. The domain modules
(``embeddings``, ``llm``, ``jev_reranker``) only bring their :class:`ServiceWording`: the noun, the
error classes and the hints that point at their own settings.

Why the standard library: each of those APIs is one JSON POST, so an SDK per vendor would add
install weight, import time and five different error types for nothing. ``http.client`` is used
directly (not ``urllib``, which closes the connection after every request) with ``urllib``'s
reading of the proxy variables; connecting has a short limit of its own (an endpoint that is not
there fails in seconds), and the whole call, reading included, is held to one deadline (a local
server may take a while to embed a large batch, but not forever).
The transport modules (``http.client`` brings ``email``) and the openai SDK are imported
only by the functions that use them, so importing this package stays cheap for the local providers.

The package is split along those parts; this module re-exports their names, so
``from memsearch.http import ...`` keeps working:

- :mod:`~memsearch.http.wording`: :class:`ServiceWording`, :class:`ApiErrors`, the key lookup, shared limits;
- :mod:`~memsearch.http.jsonclient`: :class:`JsonClient`, the stdlib transport;
- :mod:`~memsearch.http.sdk`: the openai SDK clients and :func:`sdk_errors`.
"""

from memsearch.http.jsonclient import RETRY_STATUSES, JsonClient
from memsearch.http.sdk import OpenAIClients, openai_client, sdk_errors
from memsearch.http.wording import (
    CONNECT_TIMEOUT,
    PLACEHOLDER_KEY,
    RETRY_DELAY,
    SERVER_FAILED_HINT,
    ApiErrors,
    ServiceWording,
    resolve_api_key,
)

__all__ = [
    "CONNECT_TIMEOUT",
    "PLACEHOLDER_KEY",
    "RETRY_DELAY",
    "RETRY_STATUSES",
    "SERVER_FAILED_HINT",
    "ApiErrors",
    "JsonClient",
    "OpenAIClients",
    "ServiceWording",
    "openai_client",
    "resolve_api_key",
    "sdk_errors",
]
