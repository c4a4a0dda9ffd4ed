"""Whose environment the engine reads: the caller's, also when the store's owner does the work.

Why: a Milvus Lite store has one owner process, and every other memsearch process of the user
sends it its operations. Credentials and endpoints come partly from the environment
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OLLAMA_HOST``, Vertex's project and token...), and
the owner's environment is not the caller's: read there, a caller with no key would be served
with the owner's key, and a caller pointing at another API would be served through the owner's.
So the caller sends the variables of :data:`PREFIXES` that it has (:func:`snapshot`, over the
private, uid-checked socket), the owner keeps one engine per distinct settings *and* caller
environment, and runs that engine's work inside :func:`as_caller`; the engine reads every such
variable through :func:`getenv`, which inside a caller's scope answers from the caller's variables
only (a variable the caller lacks is unset, never the owner's). Outside any scope, in a process
working for itself, :func:`getenv` is ``os.environ``.

The scope is a ``ContextVar``: each asyncio task and each ``asyncio.to_thread`` call carries its
own, so two callers' requests on the owner's one engine loop never see each other's variables.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Coroutine, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

#: The environment variables the engine may read for credentials and endpoints, by prefix: every
#: embedding vendor's, Ollama's, and the Jev reranker's (a new variable under one of them is
#: covered without a change here).
PREFIXES = (
    "OPENAI_",
    "GOOGLE_",
    "GEMINI_",
    "VOYAGE_",
    "JINA_",
    "MISTRAL_",
    "OLLAMA_",
    "TYPESAFE_",
    "MEMSEARCH_JEV_",
)

_caller: ContextVar[Mapping[str, str] | None] = ContextVar("memsearch_caller_env", default=None)


def getenv(name: str) -> str:
    """``name``'s value for whoever this work is for ("" when unset): the caller's variable inside
    :func:`as_caller`, this process's own otherwise."""
    env = _caller.get()
    return (os.environ if env is None else env).get(name, "")


def snapshot() -> dict[str, str]:
    """This process's variables under :data:`PREFIXES`: what it sends with each request."""
    return {name: value for name, value in os.environ.items() if name.startswith(PREFIXES)}


def checked(env: object) -> dict[str, str] | None:
    """A caller's variables as received, or None when they are not a mapping of names under
    :data:`PREFIXES` to strings (the request is then refused)."""
    if not isinstance(env, dict):
        return None
    for name, value in env.items():
        if not (isinstance(name, str) and name.startswith(PREFIXES) and isinstance(value, str)):
            return None
    return dict(env)


def digest(env: Mapping[str, str]) -> str:
    """Equal for equal variables; what an engine is keyed by (the owner keeps no second copy)."""
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


async def as_caller(env: Mapping[str, str], work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` with :func:`getenv` answering from ``env`` (this task only)."""
    token = _caller.set(dict(env))
    try:
        return await work
    finally:
        _caller.reset(token)
