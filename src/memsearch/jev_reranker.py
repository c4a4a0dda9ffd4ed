"""The remote reranker: TypeSafe's Jev decision model, selected by ``reranker.model = "jev:<model>"``.

This module owns :class:`JevReranker`: the request (one batched call; every candidate is a separate
``noul`` question, ``d0`` .. ``dN``, judged against the query held in ``state.query_excerpt``),
the validation of the answer (exactly those ids, each of type ``noul`` with a finite score in
[0, 1]) and the ranking (copies of the candidates, sorted by score, ties kept in search order).

Why it is strict: a reranker that quietly returned the unreranked candidates on failure would make
a broken key or a changed API look like a poor model. Every failure (no key, unreachable, slow,
HTTP error, an answer that does not cover the candidates) is one :class:`~memsearch.errors.
RerankerError` with a hint. The HTTP call is the stdlib helper every remote caller uses
(:func:`memsearch.http.post_json`), worded for a reranker.

Privacy: a search with this reranker sends the query and the full text of its candidates to
TypeSafe (or to ``MEMSEARCH_JEV_URL`` when set: a self-hosted gateway, or a fake server in tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memsearch.callerenv import getenv
from memsearch.errors import (
    ConfigValueError,
    InvalidRerankAnswerError,
    MissingRerankerKeyError,
    RerankerAPIError,
)
from memsearch.http import SERVER_FAILED_HINT, ApiErrors, JsonClient, ServiceWording, resolve_api_key

#: What ``reranker.model = "jev:"`` plus a model name asks for when none is given.
DEFAULT_MODEL = "jev-latest"
#: TypeSafe's public endpoint; ``MEMSEARCH_JEV_URL`` replaces it.
DEFAULT_URL = "https://api.typesafe.ai/v1/systemone"
URL_ENV = "MEMSEARCH_JEV_URL"
KEY_ENV = "TYPESAFE_API_KEY"
#: Total deadline of one rerank request, seconds.
DEFAULT_TIMEOUT = 60.0

#: What each candidate's question asks (the candidate's text is appended to it).
INSTRUCTIONS = (
    "A search over a project's memory notes returned the passage below for the query in the "
    "state. Judge whether this passage itself answers the query: does it record the particular "
    "fact, decision, step or event that the query is looking for?"
)
#: The two outcomes the model weighs; its ``noul`` score is the probability of "true".
CRITERIA = {
    "true": (
        "The passage contains the information the query asks for, or one piece of it when the "
        "answer has to be assembled from several notes."
    ),
    "false": (
        "The passage only shares the query's subject or project, without the information the query asks for."
    ),
}

RERANKING = ServiceWording(
    kind="reranking",
    error=RerankerAPIError,
    missing_key_error=MissingRerankerKeyError,
    key_hint='Set {key_env} to a TypeSafe API key, or set reranker.model to a local model ("" turns '
    "reranking off).",
    unreachable_hint=f"Check the network (and {URL_ENV}, if it is set); reranker.model "
    '"" turns reranking off.',
    timeout_hint="Try again, or search with a smaller --top-k (fewer candidates to score).",
    bad_response_hint=f"Check that {URL_ENV}, if set, points at a Jev API.",
    status_hints={
        400: "Check reranker.model: the API refused the request (is the model name one it serves?).",
        404: f"Check reranker.model and {URL_ENV}: the endpoint or model was not found.",
        413: "Search with a smaller --top-k: the request was too large.",
        429: "The API is rate-limiting or out of quota; wait and try again.",
        **dict.fromkeys((500, 502, 503, 504), SERVER_FAILED_HINT),
    },
)
ERRORS = ApiErrors("Jev", (KEY_ENV,), wording=RERANKING)


#: The connections every :class:`JevReranker` of this process shares (a search builds a reranker
#: per query, so an instance's own would never be reused); thread-safe, kept alive between searches.
_SHARED = JsonClient()


def endpoint() -> str:
    """The URL rerank requests go to: ``MEMSEARCH_JEV_URL`` when set, else TypeSafe's."""
    return getenv(URL_ENV).strip() or DEFAULT_URL


class JevReranker:
    """Rescore search candidates with a Jev model in one request; content is sent untruncated.

    The key comes from ``api_key``, else ``TYPESAFE_API_KEY``, and is looked up only when there is
    something to rerank (an empty candidate list needs no key and no request). Requests go over
    ``client`` (default: one keep-alive client shared by the process's rerankers).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        url: str | None = None,
        client: JsonClient | None = None,
    ) -> None:
        if not model:
            raise ConfigValueError(
                "The Jev reranker needs a model name.",
                hint=f'Set reranker.model to "jev:{DEFAULT_MODEL}" or to a pinned version such as '
                '"jev:jev-1.13.0".',
            )
        if not timeout > 0:
            raise ConfigValueError(f"The Jev reranker's timeout must be positive (got {timeout}).")
        self.model = model
        self.timeout = timeout
        self.url = url or endpoint()
        self._api_key = api_key
        self._client = client or _SHARED

    def build_request(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        """The request body: the query once, then one independent question per candidate."""
        if not isinstance(query, str) or not all(isinstance(doc, str) for doc in documents):
            raise TypeError("the query and the candidates' content must be strings")
        return {
            "model": self.model,
            "state": {"query_excerpt": query},
            "questions": {
                f"d{i}": {
                    "type": "noul",
                    "instructions": f"{INSTRUCTIONS}\n\nPassage:\n{doc}",
                    "criteria": dict(CRITERIA),
                }
                for i, doc in enumerate(documents)
            },
        }

    @staticmethod
    def scores(response: Any, count: int, *, url: str | None = None) -> list[float]:
        """The ``count`` scores of ``response`` (from ``url``), in candidate order; anything off is
        an :class:`~memsearch.errors.InvalidRerankAnswerError`."""

        def invalid(detail: str) -> InvalidRerankAnswerError:
            return InvalidRerankAnswerError(
                f"The Jev reranking endpoint at {url or endpoint()} sent an invalid answer: {detail}",
                hint=ERRORS.wording.bad_response_hint,
            )

        answers = response.get("answers") if isinstance(response, dict) else None
        if not isinstance(answers, dict):
            raise invalid("no 'answers' object")
        expected = [f"d{i}" for i in range(count)]
        if set(answers) != set(expected):
            missing = sorted(set(expected) - set(answers))
            extra = sorted(set(answers) - set(expected), key=str)
            parts = ([f"missing {', '.join(missing[:5])}"] if missing else []) + (
                [f"unexpected {', '.join(map(str, extra[:5]))}"] if extra else []
            )
            raise invalid(f"missing or unexpected answers for {count} candidates ({'; '.join(parts)})")
        out: list[float] = []
        for key in expected:
            answer = answers[key]
            if not isinstance(answer, dict) or answer.get("type") != "noul":
                kind = answer.get("type") if isinstance(answer, dict) else type(answer).__name__
                raise invalid(f"unexpected answer type {kind!r} for {key} (not 'noul')")
            score = answer.get("noul")
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise invalid(f"answer {key} has no finite numeric score ({score!r})")
            if not 0.0 <= score <= 1.0:
                raise invalid(f"answer {key} has a score outside [0, 1] ({score!r})")
            out.append(float(score))
        return out

    def evaluate(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        """Send one rerank request and return the validated answer (with the model's usage data)."""
        if not documents:
            return {"model": self.model, "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}
        key = resolve_api_key(self._api_key, ERRORS, required=False)
        if not key:
            raise MissingRerankerKeyError(
                f"The Jev reranker needs an API key: {KEY_ENV} is not set.", hint=ERRORS.key_hint()
            )
        body = self.build_request(query, documents)
        result = self._client.post_json(
            self.url,
            body,
            headers={"Authorization": f"Bearer {key}"},
            errors=ERRORS,
            timeout=self.timeout,
        )
        self.scores(result, len(documents), url=self.url)
        answer: dict[str, Any] = result
        return answer

    def rerank(
        self, query: str, results: Sequence[dict[str, Any]], *, top_k: int = 0
    ) -> list[dict[str, Any]]:
        """Copies of ``results`` with Jev's scores, best first (ties keep their search order);
        the best ``top_k`` (all when 0)."""
        if top_k < 0:
            raise ConfigValueError(f"top_k must not be negative (got {top_k})")
        if not results:
            return []
        documents = [str(r.get("content") or "") for r in results]
        scores = self.scores(self.evaluate(query, documents), len(results), url=self.url)
        ranked = [{**r, "score": s} for r, s in zip(results, scores, strict=True)]
        ranked.sort(key=lambda r: r["score"], reverse=True)  # stable: ties stay in input order
        return ranked[:top_k] if top_k else ranked
