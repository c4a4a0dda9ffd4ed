"""The Google provider: Gemini embeddings over the Generative Language REST API, or over Vertex AI.

This module owns the ``batchEmbedContents`` request (task type ``RETRIEVAL_DOCUMENT`` for chunks,
``RETRIEVAL_QUERY`` for queries), the table of known models and the dimension we ask them for, and
the key lookup (``GOOGLE_API_KEY``, else ``GEMINI_API_KEY``, as Google's SDK does). The key travels
in the ``x-goog-api-key`` header, never in the URL, so it cannot leak into an error message.

With ``GOOGLE_GENAI_USE_VERTEXAI=true`` (the switch Google's own SDK reads) the same provider talks
to Vertex AI instead (:class:`VertexMode`): the model's ``:predict`` endpoint, one ``instances``
entry per text, authenticated either

- with an OAuth access token for ``GOOGLE_CLOUD_PROJECT`` in ``GOOGLE_CLOUD_LOCATION`` (default
  ``us-central1``): ``GOOGLE_OAUTH_ACCESS_TOKEN`` if set, else what ``gcloud auth print-access-token``
  prints (run once, then reused for 45 minutes; a rejected token is fetched again once); or
- with an API key (Vertex AI express mode), when ``embedding.api_key`` is set, or when no project is
  set and ``GOOGLE_API_KEY`` is.

Why REST and a ``gcloud`` subprocess rather than google-auth: one JSON POST needs no SDK, and the
people who use Vertex AI from a terminal have gcloud; a service account token can be passed in
``GOOGLE_OAUTH_ACCESS_TOKEN``.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from memsearch.callerenv import getenv
from memsearch.embeddings.base import EMBEDDING, EmbeddingErrors
from memsearch.embeddings.rest import RestEmbedder
from memsearch.errors import EmbeddingAPIError, MissingAPIKeyError
from memsearch.http import ApiErrors

#: model -> the output dimensionality we request (768 keeps indexes made by the original memsearch
#: compatible; gemini-embedding-001 is natively 3072). Unknown models get their native dimension.
GOOGLE_DIMENSIONS: dict[str, int] = {
    "gemini-embedding-001": 768,
    "gemini-embedding-2-preview": 768,
    "text-embedding-005": 768,
    "text-embedding-004": 768,
}

TASK_TYPES = {False: "RETRIEVAL_DOCUMENT", True: "RETRIEVAL_QUERY"}

VERTEX_ENV = "GOOGLE_GENAI_USE_VERTEXAI"
PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"
LOCATION_ENV = "GOOGLE_CLOUD_LOCATION"
TOKEN_ENV = "GOOGLE_OAUTH_ACCESS_TOKEN"
DEFAULT_LOCATION = "us-central1"
#: Vertex AI express mode (an API key, no project).
EXPRESS_BASE_URL = "https://aiplatform.googleapis.com/v1"
#: How long ``gcloud auth print-access-token`` may take, and how long its token is reused
#: (tokens live an hour).
GCLOUD_TIMEOUT = 20.0
TOKEN_REUSE = 45 * 60.0
#: Texts per ``:predict`` call on Vertex AI: Gemini embedding models take one input per request
#: there; the text-embedding models take up to 250 but at most 20,000 tokens, which 32 chunks of
#: the default size stay under.
VERTEX_GEMINI_BATCH = 1
VERTEX_BATCH = 32

_OAUTH_WORDING = dataclasses.replace(
    EMBEDDING,
    key_hint=f"The access token was refused: set {TOKEN_ENV} to a fresh token "
    "(gcloud auth print-access-token), or run gcloud auth login; the account needs Vertex AI access "
    f"in {PROJECT_ENV}.",
)


def vertex_requested() -> bool:
    """Whether ``GOOGLE_GENAI_USE_VERTEXAI`` asks for Vertex AI (``true`` or ``1``, any case)."""
    return getenv(VERTEX_ENV).strip().lower() in ("true", "1")


@dataclass
class VertexMode:
    """Where and how a Vertex AI request goes: a project endpoint with OAuth, or express mode."""

    root: str  # up to and including /v1 (or the base_url override)
    project: str = ""  # "" in express mode
    location: str = ""

    def url(self, model: str) -> str:
        path = f"/publishers/google/models/{model}:predict"
        if self.project:
            path = f"/projects/{self.project}/locations/{self.location}{path}"
        return self.root + path


class GoogleEmbedding(RestEmbedder):
    """Embeddings from the Gemini API (``POST {base}/models/{model}:batchEmbedContents``), or from
    Vertex AI (``POST .../publishers/google/models/{model}:predict``) in Vertex mode."""

    provider_name = "google"
    default_model = "gemini-embedding-001"
    default_batch_size = 100  # the API's limit of requests per batch call
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    known_dimensions = GOOGLE_DIMENSIONS
    api_errors: ClassVar[ApiErrors] = EmbeddingErrors("Gemini", ("GOOGLE_API_KEY", "GEMINI_API_KEY"))

    #: Where Vertex AI requests go, in Vertex mode (``None``: the Gemini API).
    vertex: VertexMode | None = None

    def _default_batch_size(self, model: str | None) -> int:
        if not vertex_requested():
            return 0
        model_id = (model or self.default_model).removeprefix("models/")
        return VERTEX_GEMINI_BATCH if model_id.startswith("gemini") else VERTEX_BATCH

    def _configured(self, *, base_url: str | None, api_key: str | None) -> None:
        if not vertex_requested():
            return
        self._token = ""
        self._token_time = 0.0
        self._token_lock = threading.Lock()
        project = getenv(PROJECT_ENV).strip()
        explicit_key = bool(api_key)
        if not explicit_key and not project:
            self.api_key = getenv("GOOGLE_API_KEY").strip() or None
        if explicit_key or (self.api_key and not project):  # express mode
            self.vertex = VertexMode(base_url.rstrip("/") if base_url else EXPRESS_BASE_URL)
            self.errors = EmbeddingErrors("Vertex AI", ("GOOGLE_API_KEY",))
            return
        self.api_key = None
        if not project:
            raise MissingAPIKeyError(
                f"{VERTEX_ENV} is set, but Vertex AI needs a project or an API key.",
                hint=f"Set {PROJECT_ENV} (and {LOCATION_ENV}, default {DEFAULT_LOCATION}; the token comes "
                f"from {TOKEN_ENV} or gcloud), or GOOGLE_API_KEY for Vertex AI express mode; or unset "
                f"{VERTEX_ENV} to use the Gemini API.",
            )
        location = getenv(LOCATION_ENV).strip() or DEFAULT_LOCATION
        host = (
            "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
        )
        root = base_url.rstrip("/") if base_url else f"https://{host}/v1"
        self.vertex = VertexMode(root, project, location)
        self.errors = EmbeddingErrors("Vertex AI", (TOKEN_ENV,), wording=_OAUTH_WORDING)

    def _requires_key(self) -> bool:
        return not vertex_requested()  # Vertex AI: OAuth unless a key is given

    @property
    def _model_id(self) -> str:
        return self._model.removeprefix("models/")

    @property
    def cache_namespace(self) -> str:
        # Vertex AI serves models the Gemini API does not; keep their vectors apart.
        return super().cache_namespace + ("@vertex" if self.vertex else "")

    def _url(self) -> str:
        if self.vertex is not None:
            return self.vertex.url(self._model_id)
        return f"{self.base_url}/models/{self._model_id}:batchEmbedContents"

    def _headers(self) -> dict[str, str]:
        if self.vertex is not None and self.vertex.project:
            return {"Authorization": f"Bearer {self._access_token()}"}
        return {"x-goog-api-key": self.api_key or ""}

    def _body(self, texts: list[str], *, query: bool) -> dict[str, Any]:
        dimension = self._dimension if self._dimension_from_table else None
        if self.vertex is not None:
            body: dict[str, Any] = {
                "instances": [{"content": text, "task_type": TASK_TYPES[query]} for text in texts]
            }
            if dimension is not None:
                body["parameters"] = {"outputDimensionality": dimension}
            return body
        extra: dict[str, Any] = {"taskType": TASK_TYPES[query]}
        if dimension is not None:
            extra["outputDimensionality"] = dimension
        return {
            "requests": [
                {"model": f"models/{self._model_id}", "content": {"parts": [{"text": text}]}, **extra}
                for text in texts
            ]
        }

    def _vectors(self, payload: Any) -> list[list[float]]:
        if self.vertex is not None:
            return [list(map(float, item["embeddings"]["values"])) for item in payload["predictions"]]
        return [list(map(float, item["values"])) for item in payload["embeddings"]]

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        if self.vertex is None or not self.vertex.project or getenv(TOKEN_ENV).strip():
            return await super()._embed_batch(conn, texts, query=query)
        try:
            return await super()._embed_batch(conn, texts, query=query)
        except EmbeddingAPIError as exc:
            if "(HTTP 401)" not in str(exc):
                raise
            # A gcloud token that expired while we held it: fetch a new one, once.
            with self._token_lock:
                self._token = ""
            return await super()._embed_batch(conn, texts, query=query)

    # --- the OAuth token -------------------------------------------------------------------

    def _access_token(self) -> str:
        token = getenv(TOKEN_ENV).strip()
        if token:
            return token
        with self._token_lock:
            if not self._token or time.monotonic() - self._token_time > TOKEN_REUSE:
                self._token = _gcloud_token()
                self._token_time = time.monotonic()
            return self._token


def _no_token(reason: str) -> MissingAPIKeyError:
    return MissingAPIKeyError(
        f"No access token for Vertex AI: {reason}",
        hint=f"Set {TOKEN_ENV} (e.g. to the output of gcloud auth print-access-token), or install the "
        "gcloud CLI and run gcloud auth login; or set GOOGLE_API_KEY (without "
        f"{PROJECT_ENV}) for Vertex AI express mode.",
    )


def _gcloud_token() -> str:
    """``gcloud auth print-access-token``'s token; a clear error when gcloud is absent or fails."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise _no_token(f"{TOKEN_ENV} is not set and the gcloud CLI is not on PATH.")
    try:
        proc = subprocess.run(
            [gcloud, "auth", "print-access-token"],
            capture_output=True,
            text=True,
            timeout=GCLOUD_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise _no_token(
            f"gcloud auth print-access-token did not finish within {GCLOUD_TIMEOUT:g} s."
        ) from None
    except OSError as exc:
        raise _no_token(f"gcloud could not be run ({exc.strerror or exc}).") from None
    token = proc.stdout.strip()
    if proc.returncode != 0 or not token:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise _no_token(f"gcloud auth print-access-token failed: {last}")
    return token.splitlines()[-1].strip()
