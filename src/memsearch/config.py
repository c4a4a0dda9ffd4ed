"""Configuration: the typed settings tree, layered loading, ``env:`` references, and get/set.

This module owns every memsearch setting: its name (a dotted key such as ``chunking.max_chunk_size``),
its type and default (the dataclasses below), where it can come from, and how a value typed by a
person (``memsearch config set``, an environment variable) becomes the right type.

Layers, lowest to highest (``resolve_config``):

1. dataclass defaults;
2. the global file ``~/.memsearch/config.toml``;
3. the project file ``.memsearch.toml`` — the nearest one in the working directory or its parents,
   never above the repository root (the first directory holding ``.git``) or the home directory. It
   usually arrives with a cloned repository, so it is untrusted: only :data:`PROJECT_ALLOWED_KEYS`
   are taken from it, everything else is dropped and recorded in ``cfg.origin``;
4. overrides (CLI flags, through :data:`FLAG_KEYS`).

Then ``env:VAR`` strings are replaced by environment variables (except under ``llm.providers``, which
are resolved only when that provider is used, so an unused provider with an unset variable breaks
nothing) and every value is converted to its field's type. Files are validated as they are read, so
a wrong type names the file, the key and the expected type; unknown keys are logged and ignored.

Only the standard library is imported at module level (TOML parsing and writing are imported when a
file is read or written), so every command can afford to read its configuration.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from memsearch.errors import ConfigEnvVarError, ConfigError, ConfigKeyError, ConfigValueError

__all__ = [
    "DEFAULT_FLAG_KEYS",
    "DEFAULT_MILVUS_URI",
    "FLAG_KEYS",
    "LLM_DEFAULT_MODELS",
    "PLUGIN_PLATFORMS",
    "PLUGIN_TASKS",
    "PROJECT_ALLOWED_KEYS",
    "PROJECT_CONFIG_NAME",
    "SECRET_FIELDS",
    "SECTIONS",
    "ChunkingConfig",
    "CompactConfig",
    "ConfigOrigin",
    "EmbeddingConfig",
    "IndexingConfig",
    "LLMConfig",
    "LLMProviderConfig",
    "MemSearchConfig",
    "MilvusConfig",
    "PluginMaintenanceTaskConfig",
    "PluginMemoryToSkillConfig",
    "PluginPlatformConfig",
    "PluginRecallConfig",
    "PluginSummarizeConfig",
    "PluginsConfig",
    "PromptsConfig",
    "RerankerConfig",
    "ServiceConfig",
    "WatchConfig",
    "config_from_flags",
    "config_to_dict",
    "deep_merge",
    "default_model_for",
    "filter_project_config",
    "find_project_config",
    "get_config_value",
    "global_config_path",
    "is_secret_key",
    "load_config_file",
    "mask_secrets",
    "mask_value",
    "memsearch_home",
    "merge_list_flags",
    "merged_file_config",
    "overrides_from_flags",
    "parse_value",
    "project_config_target",
    "resolve_config",
    "resolve_env_ref",
    "save_config",
    "set_config_value",
    "update_config_file",
]

logger = logging.getLogger("memsearch.config")

PROJECT_CONFIG_NAME = ".memsearch.toml"
DEFAULT_MILVUS_URI = "~/.memsearch/milvus.db"

#: The only keys a project file may set. A ``.memsearch.toml`` comes with whatever repository was
#: cloned, so it must not be able to redirect the index (URIs, tokens), leak code to an endpoint of its
#: choosing (providers, base URLs, keys), or change what runs (LLM, prompts, plugins).
PROJECT_ALLOWED_KEYS: tuple[str, ...] = (
    "milvus.collection",
    "embedding.batch_size",
    "chunking.max_chunk_size",
    "chunking.overlap_lines",
    "indexing.ignore_files",
    "indexing.exclude",
    "watch.debounce_ms",
)

#: Field names whose values are secrets wherever they appear (``embedding.api_key``,
#: ``llm.providers.<name>.api_key``, ``milvus.token``, ...).
SECRET_FIELDS: frozenset[str] = frozenset({"api_key", "token"})

#: What a masked secret looks like in ``config list`` / ``config get`` output.
MASK = "********"

PLUGIN_PLATFORMS: tuple[str, ...] = ("claude-code", "codex", "opencode", "openclaw", "dsh")
PLUGIN_TASKS: tuple[str, ...] = ("summarize", "project_review", "user_profile", "memory_to_skill")

#: Suggested model per LLM backend (what an empty ``llm.model`` means for that backend).
LLM_DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-5-mini",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-3-flash-preview",
}

#: Where each deprecated ``[compact]`` key moved to.
COMPACT_KEY_MOVES: dict[str, str] = {
    "llm_provider": "llm.provider",
    "llm_model": "llm.model",
    "prompt_file": "prompts.compact",
    "base_url": "llm.base_url",
    "api_key": "llm.api_key",
}

#: Lower bounds of numeric fields (by field name; the names are unique across the tree).
_MINIMUMS: dict[str, float] = {
    "max_chunk_size": 1,
    "overlap_lines": 0,
    "batch_size": 0,
    "debounce_ms": 0,
    "lock_timeout": 0,
    "timeout": 0,
    "min_interval_hours": 0,
    "min_occurrences": 1,
    "top_k": 1,
    "idle_timeout": 1,
}


def memsearch_home() -> Path:
    """``~/.memsearch``, computed on each call so a changed ``HOME`` (tests, sudo) is honoured."""
    return Path.home() / ".memsearch"


def global_config_path() -> Path:
    """The global (trusted) config file, ``~/.memsearch/config.toml``."""
    return memsearch_home() / "config.toml"


# --- the settings tree ------------------------------------------------------------------------


@dataclass
class MilvusConfig:
    """Where the index lives. ``uri`` is a Milvus Lite path or an ``http(s)://`` server URI."""

    uri: str = DEFAULT_MILVUS_URI
    token: str = ""
    collection: str = "memsearch_chunks"
    #: Seconds a direct open waits for a Milvus Lite database another process holds.
    lock_timeout: float = 10.0


@dataclass
class EmbeddingConfig:
    """Which embedding provider and model. ``model == ""`` means the provider's default."""

    provider: str = "onnx"
    model: str = ""
    batch_size: int = 0
    base_url: str = ""
    api_key: str = ""
    #: Total deadline of one request to a remote embedding API, seconds (0: the provider's default,
    #: 60 s; 300 s for Ollama, whose first request loads the model).
    timeout: float = 0


@dataclass
class CompactConfig:
    """Deprecated ``[compact]`` section; kept so old files load. See :data:`COMPACT_KEY_MOVES`."""

    llm_provider: str = "openai"
    llm_model: str = ""
    prompt_file: str = ""
    base_url: str = ""
    api_key: str = ""


@dataclass
class ChunkingConfig:
    max_chunk_size: int = 1500
    overlap_lines: int = 2


@dataclass
class IndexingConfig:
    """Opt-in ignore rules: ``ignore_files`` are gitignore-style files, ``exclude`` glob patterns."""

    ignore_files: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)


@dataclass
class WatchConfig:
    debounce_ms: int = 1500


@dataclass
class ServiceConfig:
    """The memory service started on demand by the CLI's read commands and the agent hooks."""

    #: Start one when none runs for the store (``MEMSEARCH_SERVICE_AUTOSTART=0`` turns it off too).
    autostart: bool = True
    #: Seconds without a connection after which a service started on demand exits
    #: (``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` overrides it).
    idle_timeout: float = 300.0


@dataclass
class RerankerConfig:
    """Cross-encoder reranker; an empty ``model`` disables reranking."""

    model: str = ""


@dataclass
class LLMProviderConfig:
    """A named LLM endpoint (``[llm.providers.<name>]``). Values may stay ``env:VAR`` until used."""

    type: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""

    def resolved(self, name: str = "<name>") -> LLMProviderConfig:
        """A copy with ``env:`` references replaced — call this only when the provider is used."""
        return LLMProviderConfig(
            **{
                f.name: resolve_env_ref(getattr(self, f.name), key=f"llm.providers.{name}.{f.name}")
                for f in fields(self)
            }
        )


@dataclass
class LLMConfig:
    """The LLM used by ``compact``, plus named providers that plugins route summaries to."""

    provider: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    providers: dict[str, LLMProviderConfig] = field(default_factory=dict)


@dataclass
class PromptsConfig:
    """Paths to custom prompt templates; empty means the built-in prompt."""

    compact: str = ""
    summarize: str = ""
    project_review: str = ""
    user_profile: str = ""
    memory_to_skill: str = ""


@dataclass
class PluginSummarizeConfig:
    """Per-turn summaries. ``provider`` empty or ``native`` means the host agent summarises."""

    enabled: bool = True
    provider: str = ""
    model: str = ""


@dataclass
class PluginMaintenanceTaskConfig:
    """A periodic background task that writes one markdown file from the memory folder."""

    enabled: bool = False
    provider: str = "native"
    model: str = ""
    min_interval_hours: int = 24
    input_dir: str = ".memsearch/memory"
    output_file: str = ""


@dataclass
class PluginMemoryToSkillConfig:
    enabled: bool = False
    provider: str = "native"
    model: str = ""
    min_interval_hours: int = 24
    input_dir: str = ".memsearch/memory"
    min_occurrences: int = 3
    paths: list[str] = field(default_factory=list)


@dataclass
class PluginRecallConfig:
    """Recall on each prompt (``[plugins.<platform>.prompt_recall]``). ``auto_inject`` adds the
    ``top_k`` best search hits for the prompt to the model's context (off by default: the one-line
    hint to use the memory-recall skill costs fewer tokens)."""

    auto_inject: bool = False
    top_k: int = 3


@dataclass
class PluginPlatformConfig:
    summarize: PluginSummarizeConfig = field(default_factory=PluginSummarizeConfig)
    prompt_recall: PluginRecallConfig = field(default_factory=PluginRecallConfig)
    project_review: PluginMaintenanceTaskConfig = field(
        default_factory=lambda: PluginMaintenanceTaskConfig(output_file=".memsearch/PROJECT.md")
    )
    user_profile: PluginMaintenanceTaskConfig = field(
        default_factory=lambda: PluginMaintenanceTaskConfig(output_file=".memsearch/USER.md")
    )
    memory_to_skill: PluginMemoryToSkillConfig = field(default_factory=PluginMemoryToSkillConfig)


@dataclass
class PluginsConfig:
    """Per-platform plugin settings. TOML uses ``claude-code`` (``claude_code`` is accepted too)."""

    claude_code: PluginPlatformConfig = field(
        default_factory=PluginPlatformConfig, metadata={"toml": "claude-code"}
    )
    codex: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    opencode: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    openclaw: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    dsh: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)

    def platform(self, name: str) -> PluginPlatformConfig:
        """The settings of one platform by its TOML or Python name; unknown names list the valid ones."""
        attr = name.replace("-", "_")
        if name.replace("_", "-") not in PLUGIN_PLATFORMS:
            raise ConfigKeyError(
                f"Unknown plugin platform: {name}", hint=f"Valid platforms: {', '.join(PLUGIN_PLATFORMS)}"
            )
        value: PluginPlatformConfig = getattr(self, attr)
        return value


@dataclass
class ConfigOrigin:
    """Where a resolved config came from. Not a setting: never serialised or merged."""

    global_path: Path | None = None
    project_path: Path | None = None
    #: Dotted keys present in the project file but dropped by the allowlist (or unknown).
    ignored_project_keys: list[str] = field(default_factory=list)
    #: ``embedding.model`` was set nowhere and holds the provider's default: the user did not choose
    #: it, so a store the original memsearch built may keep the original's model (memsearch.migration).
    default_embedding_model: bool = False


@dataclass
class MemSearchConfig:
    milvus: MilvusConfig = field(default_factory=MilvusConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    compact: CompactConfig = field(default_factory=CompactConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    indexing: IndexingConfig = field(default_factory=IndexingConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    origin: ConfigOrigin = field(
        default_factory=ConfigOrigin, repr=False, compare=False, metadata={"internal": True}
    )


# --- schema introspection -----------------------------------------------------------------------


@cache
def _schema(cls: type) -> dict[str, tuple[str, Any]]:
    """TOML key -> (attribute name, resolved type) for a settings dataclass."""
    hints = typing.get_type_hints(cls)
    return {
        f.metadata.get("toml", f.name): (f.name, hints[f.name])
        for f in fields(cls)
        if not f.metadata.get("internal")
    }


@cache
def _aliases(cls: type) -> dict[str, str]:
    """Accepted alternative TOML keys (the Python attribute name) -> canonical TOML key."""
    return {attr: key for key, (attr, _tp) in _schema(cls).items() if attr != key}


SECTIONS: tuple[str, ...] = tuple(_schema(MemSearchConfig))

_TYPE_WORDS: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean (true or false)",
    list[str]: "a list of strings",
}


def _is_table(tp: Any) -> bool:
    return isinstance(tp, type) and is_dataclass(tp)


def _is_mapping(tp: Any) -> bool:
    return typing.get_origin(tp) is dict


def _describe(tp: Any) -> str:
    if _is_table(tp) or _is_mapping(tp):
        return "a table"
    return _TYPE_WORDS.get(tp, str(tp))


def _kind_of(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


_MISMATCH = object()


def _exact(tp: Any, value: Any) -> Any:
    """``value`` if it already has type ``tp`` (ints widen to floats), else :data:`_MISMATCH`."""
    if tp is bool:
        return value if isinstance(value, bool) else _MISMATCH
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _MISMATCH
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else _MISMATCH
    if typing.get_origin(tp) is list:
        ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
        return list(value) if ok else _MISMATCH
    return value if isinstance(value, str) else _MISMATCH


def _check_range(name: str, value: Any, key: str, where: str = "") -> None:
    low = _MINIMUMS.get(name)
    if low is not None and isinstance(value, (int, float)) and value < low:
        raise ConfigValueError(
            f"Invalid value for '{key}'{where}: must be >= {low:g} (got {value})",
            hint=f"Use a value of at least {low:g}.",
        )


def _is_env_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("env:")


def _check_table(
    cls: type, data: Any, prefix: str, source: str, *, strict_keys: bool = False
) -> dict[str, Any]:
    """Validate one layer against the dataclass ``cls``: types, ranges and known keys.

    Returns a copy with canonical keys (``claude_code`` -> ``claude-code``) and without unknown keys.
    ``env:`` strings are accepted for any field; they are converted after resolution. Unknown keys
    are logged and dropped for files; ``strict_keys`` (programmatic overrides) raises instead.
    """
    where = f" in {source}" if source else ""
    if not isinstance(data, dict):
        raise ConfigValueError(
            f"Invalid value for '{prefix.rstrip('.')}'{where}: expected a table, got {_kind_of(data)}",
            hint=f"Write it as a [{prefix.rstrip('.')}] section.",
        )
    schema = _schema(cls)
    aliases = _aliases(cls)
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = raw_key if raw_key in schema else aliases.get(raw_key, "")
        if not key:
            dotted = f"{prefix}{raw_key}"
            if strict_keys:
                raise ConfigKeyError(f"Unknown config key: {dotted}", hint=_valid_hint(cls, prefix))
            logger.warning("Unknown config key '%s'%s (ignored)", dotted, where)
            continue
        checked = _check_value(schema[key][1], value, f"{prefix}{key}", source, strict_keys=strict_keys)
        if key in out:  # both spellings present: the canonical one wins
            checked = deep_merge(checked, out[key]) if raw_key != key else deep_merge(out[key], checked)
        out[key] = checked
    return out


def _check_value(tp: Any, value: Any, key: str, source: str, *, strict_keys: bool) -> Any:
    if _is_table(tp):
        return _check_table(tp, value, f"{key}.", source, strict_keys=strict_keys)
    where = f" in {source}" if source else ""
    if _is_mapping(tp):
        if not isinstance(value, dict):
            raise ConfigValueError(
                f"Invalid value for '{key}'{where}: expected a table, got {_kind_of(value)}",
                hint=f"Write each entry as a [{key}.<name>] section.",
            )
        item_type = typing.get_args(tp)[1]
        return {
            name: _check_table(item_type, item, f"{key}.{name}.", source, strict_keys=strict_keys)
            for name, item in value.items()
        }
    if _is_env_ref(value):
        return value
    checked = _exact(tp, value)
    if checked is _MISMATCH:
        raise ConfigValueError(
            f"Invalid value for '{key}'{where}: expected {_describe(tp)}, got {value!r} ({_kind_of(value)})",
            hint=f"Fix the value{where}, or run: memsearch config set {key} <value>",
        )
    _check_range(key.rsplit(".", 1)[-1], checked, key, where)
    return checked


def _valid_hint(cls: type, prefix: str) -> str:
    names = ", ".join(_schema(cls))
    return f"Valid keys under '{prefix.rstrip('.')}': {names}" if prefix else f"Valid sections: {names}"


# --- text coercion (config set, env: values) ----------------------------------------------------

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _as_text(item: Any) -> str:
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)


def _coerce(tp: Any, value: Any, name: str) -> Any:
    """Turn text (a ``config set`` argument, an environment variable) into the field's type.

    Values that already have the right type pass through. ``name`` is the field name used in the
    messages, which match the original memsearch's wording.
    """
    exact = _exact(tp, value)
    if exact is not _MISMATCH:
        return exact
    text = _as_text(value).strip()
    if tp is bool:
        if text.lower() in _TRUE_WORDS:
            return True
        if text.lower() in _FALSE_WORDS:
            return False
        raise ConfigValueError(
            f"Boolean field '{name}' must be true or false", hint="Use true/false, yes/no, on/off or 1/0."
        )
    if tp is int or tp is float:
        try:
            return tp(text)
        except ValueError:
            word, example = ("an integer", "1500") if tp is int else ("a number", "10.5")
            raise ConfigValueError(
                f"Field '{name}' must be {word} (got {text!r})", hint=f"Use a value such as {example}."
            ) from None
    if typing.get_origin(tp) is list:
        if not text.startswith("["):
            return [part.strip() for part in text.split(",") if part.strip()]
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigValueError(
                f"List field '{name}' must be a JSON array: {exc}",
                hint='Use a JSON array such as ["a", "b"], or comma-separated text: a,b',
            ) from None
        return [_as_text(item) for item in parsed]  # text starting with "[" parses only as an array
    return text if isinstance(value, str) else _as_text(value)


# --- files --------------------------------------------------------------------------------------


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse one TOML file; a missing file is ``{}``. Malformed TOML raises :class:`ConfigError`."""
    p = Path(path).expanduser()
    if not p.exists():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with p.open("rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"Invalid TOML in {p}: {exc}",
            hint="Fix the syntax at that line, or move the file aside and run 'memsearch config init'.",
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Invalid TOML in {p}: not UTF-8 text (bad byte at offset {exc.start})",
            hint="Save the file as UTF-8.",
        ) from None
    except RecursionError:  # tomllib recurses per level of nested arrays/inline tables
        raise ConfigError(
            f"Invalid TOML in {p}: arrays or tables nested too deeply to read",
            hint="Fix the file, or move it aside and run 'memsearch config init'.",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"Cannot read config file {p}: {exc.strerror or exc}",
            hint="Check that it is a readable file.",
        ) from None
    return data


def save_config(data: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``data`` as TOML, atomically (temp file + ``os.replace``), creating parent directories.

    A reader never sees a half-written file. A new file is private (0600, it may hold keys); an
    existing file keeps its permissions. Comments in the old file are not preserved.
    """
    import stat
    import tempfile

    import tomli_w

    p = Path(path).expanduser()
    text = tomli_w.dumps(dict(data))
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if p.exists():
            os.chmod(tmp, stat.S_IMODE(p.stat().st_mode))
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise ConfigError(
            f"Cannot write config file {p}: {exc.strerror or exc}",
            hint="Check the directory's permissions.",
        ) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def update_config_file(path: str | os.PathLike[str], updates: Mapping[str, Any]) -> Path:
    """Merge ``updates`` into the file at ``path`` (keys not in ``updates`` are kept) and save it."""
    p = Path(path).expanduser()
    save_config(deep_merge(load_config_file(p), dict(updates)), p)
    return p


def _walk_up(start: Path) -> tuple[Path | None, Path | None]:
    """(nearest project file, repository root) seen walking up from ``start``; see find_project_config."""
    home = Path.home().absolute()
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_CONFIG_NAME
        if candidate.is_file():
            return candidate, None
        if (directory / ".git").exists():
            return None, directory
        if directory == home:
            break
    return None, None


def find_project_config(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest ``.memsearch.toml`` in ``cwd`` or its parents, or None.

    The search stops at the first directory containing ``.git`` (the repository root, which is itself
    searched), at the home directory (searched) and at the filesystem root, so a project never picks
    up a file from outside its repository.
    """
    start = Path(cwd).absolute() if cwd is not None else Path.cwd()
    return _walk_up(start)[0]


def project_config_target(cwd: str | os.PathLike[str] | None = None) -> Path:
    """Where ``config set/init --project`` writes: the nearest existing project file, else a new one
    at the repository root (the first parent with ``.git``), else in ``cwd``."""
    start = Path(cwd).absolute() if cwd is not None else Path.cwd()
    found, repo_root = _walk_up(start)
    if found is not None:
        return found
    return (repo_root or start) / PROJECT_CONFIG_NAME


def _leaves(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted key, value) for every non-table value; empty tables carry nothing and are skipped."""
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _get_path(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISMATCH
        node = node[part]
    return node


def _set_path(data: dict[str, Any], parts: list[str], value: Any) -> None:
    """Set a nested key, creating tables on the way (a non-table in the way is replaced)."""
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def filter_project_config(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Split a raw project file into (allowed part, dotted keys that were dropped).

    Dropping is silent by design (the original does the same, and a shared repository may carry
    settings meant for the original's older versions); the list lets ``config list --project`` and
    ``cfg.origin`` say what was ignored.
    """
    allowed: dict[str, Any] = {}
    ignored: list[str] = []
    for dotted, value in _leaves(data):
        if dotted in PROJECT_ALLOWED_KEYS:
            _set_path(allowed, dotted.split("."), value)
        else:
            ignored.append(dotted)
    # a table where an allowlisted scalar belongs (e.g. [milvus.collection]) must still be type-checked
    for key in PROJECT_ALLOWED_KEYS:
        value = _get_path(data, key)
        if isinstance(value, dict) and value:
            _set_path(allowed, key.split("."), value)
            ignored = [k for k in ignored if not k.startswith(f"{key}.")]
    return allowed, ignored


# --- merging and env references -----------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``override`` merged into ``base``, recursing into tables.

    ``None`` in ``override`` means "not set" and is skipped; an empty string is a value and wins.
    Neither input is modified.
    """
    result: dict[str, Any] = {k: _copy(v) for k, v in base.items()}
    for key, value in override.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = _copy(value)
    return result


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def resolve_env_ref(value: Any, *, key: str | None = None) -> Any:
    """Replace an ``env:VAR`` string by the variable's value; anything else is returned unchanged.

    An unset variable raises :class:`ConfigEnvVarError` (a ``KeyError``). ``key`` only improves the
    hint. A set-but-empty variable gives ``""``.
    """
    if not _is_env_ref(value):
        return value
    name = value[4:].strip()
    where = f" in '{key}'" if key else ""
    if not name:
        raise ConfigEnvVarError(
            f"Empty environment variable reference 'env:'{where}",
            hint="Write env:VARIABLE_NAME, or the value itself.",
        )
    resolved = os.environ.get(name)
    if resolved is None:
        fix = f"memsearch config set {key} <value>" if key else "edit the config file"
        raise ConfigEnvVarError(
            f"Environment variable '{name}' referenced in config (via 'env:{name}') is not set",
            hint=f"Export {name} in your shell, or change the setting ({fix}).",
        )
    return resolved


def _resolve_env_tree(data: Any, path: tuple[str, ...] = ()) -> Any:
    if path[:2] == ("llm", "providers"):
        return data  # resolved lazily, when that provider is used (LLMProviderConfig.resolved)
    key = ".".join(path)
    if isinstance(data, dict):
        return {k: _resolve_env_tree(v, (*path, k)) for k, v in data.items()}
    if isinstance(data, list):
        return [resolve_env_ref(item, key=key) for item in data]
    return resolve_env_ref(data, key=key)


# --- building the typed config ------------------------------------------------------------------


def _build(cls: type, data: Mapping[str, Any], default: Any, prefix: str = "") -> Any:
    """``default`` with the fields present in ``data`` replaced by converted values.

    Starting from the default *instance* keeps per-instance defaults (PROJECT.md vs USER.md). Values
    reach here type-checked, except text from ``env:`` references, which is coerced now.
    """
    changes: dict[str, Any] = {}
    for key, (attr, tp) in _schema(cls).items():
        if key not in data:
            continue
        value = data[key]
        dotted = f"{prefix}{key}"
        if _is_table(tp):
            changes[attr] = _build(tp, value, getattr(default, attr), f"{dotted}.")
        elif _is_mapping(tp):
            item_type = typing.get_args(tp)[1]
            changes[attr] = {
                name: _build(item_type, item, item_type(), f"{dotted}.{name}.")
                for name, item in value.items()
            }
        else:
            try:
                converted = _coerce(tp, value, key)
            except ConfigValueError as exc:
                raise ConfigValueError(
                    f"Invalid value for '{dotted}' (from an env: reference): {exc.message}",
                    hint="Check the environment variable that the setting's env: reference names.",
                ) from None
            _check_range(key, converted, dotted)
            changes[attr] = converted
    return replace(default, **changes)


def _default_models() -> dict[str, str]:
    """The embedding registry's default model per provider (imported lazily: config stays light)."""
    try:
        from memsearch.embeddings import DEFAULT_MODELS
    except ImportError:  # a broken or partial install must not stop config commands
        return {}
    return dict(DEFAULT_MODELS)


def default_model_for(provider: str) -> str:
    """The default embedding model of ``provider``, or ``""`` when unknown."""
    return _default_models().get(provider, "")


def _log_compact_deprecation(data: Mapping[str, Any], source: str) -> None:
    if "compact" in data:
        moves = ", ".join(f"compact.{old} -> {new}" for old, new in COMPACT_KEY_MOVES.items())
        logger.warning("The [compact] section in %s is deprecated; move its keys: %s", source, moves)


def _defaults_dict() -> dict[str, Any]:
    return config_to_dict(MemSearchConfig())


def _read_layers(cwd: Path | None) -> tuple[dict[str, Any], dict[str, Any], ConfigOrigin]:
    """The validated global layer, the validated allowlisted project layer, and their origin."""
    gpath = global_config_path()
    raw_global = load_config_file(gpath)
    _log_compact_deprecation(raw_global, str(gpath))
    global_layer = _check_table(MemSearchConfig, raw_global, "", str(gpath))

    ppath = find_project_config(cwd)
    project_layer: dict[str, Any] = {}
    ignored: list[str] = []
    if ppath is not None:
        raw_project = load_config_file(ppath)
        _log_compact_deprecation(raw_project, str(ppath))
        allowed, ignored = filter_project_config(raw_project)
        project_layer = _check_table(MemSearchConfig, allowed, "", str(ppath))
        if ignored:
            logger.info("Ignored keys not allowed in a project file %s: %s", ppath, ", ".join(ignored))
    return global_layer, project_layer, ConfigOrigin(gpath, ppath, ignored)


def merged_file_config(*, include_project: bool = True, cwd: Path | None = None) -> dict[str, Any]:
    """Defaults + global file (+ allowlisted project file), validated but *unresolved*.

    ``env:`` references stay as written and ``embedding.model`` stays as configured — what the
    ``config init`` wizard offers as defaults, so it never writes a resolved secret back.
    """
    global_layer, project_layer, _origin = _read_layers(cwd)
    merged = deep_merge(_defaults_dict(), global_layer)
    return deep_merge(merged, project_layer) if include_project else merged


def resolve_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
) -> MemSearchConfig:
    """The effective configuration: built-in defaults < ``defaults`` < global file < project file
    (allowlisted) < ``overrides``.

    ``overrides`` is a nested dict (see :func:`overrides_from_flags`); ``None`` values are skipped and
    unknown keys raise :class:`ConfigKeyError`. ``defaults`` has the same shape but yields to every
    file: it is how an integration supplies a context-derived default (a plugin's per-project
    collection via ``--default-collection``) that a user's explicit setting still beats.
    ``cwd`` is where the project-file search starts. Raises :class:`ConfigError` subclasses for
    malformed files, wrong types and unset ``env:`` variables. ``cfg.origin`` records the files used
    and the project keys that were ignored.
    """
    global_layer, project_layer, origin = _read_layers(cwd)
    default_layer, override_layer = (
        _check_table(MemSearchConfig, _drop_none(layer or {}), "", name, strict_keys=True)
        for layer, name in ((defaults, "defaults"), (overrides, "overrides"))
    )
    merged = deep_merge(deep_merge(deep_merge(default_layer, global_layer), project_layer), override_layer)
    cfg: MemSearchConfig = _build(MemSearchConfig, _resolve_env_tree(merged), MemSearchConfig())
    if not cfg.embedding.model:
        cfg.embedding.model = default_model_for(cfg.embedding.provider)
        origin.default_embedding_model = True
    cfg.origin = origin
    return cfg


def _drop_none(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out[key] = _drop_none(value)
        elif value is not None:
            out[key] = value
    return out


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain TOML-shaped data (hyphenated plugin platform keys, no ``origin``)."""
    out: dict[str, Any] = {}
    cls: type = type(cfg)
    for key, (attr, _tp) in _schema(cls).items():
        out[key] = _plain(getattr(cfg, attr))
    return out


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return config_to_dict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return list(value)
    return value


# --- CLI flags -----------------------------------------------------------------------------------

#: Click parameter name -> dotted config key. The one place a flag gets its meaning;
#: a flag set on the command line always beats every file.
FLAG_KEYS: dict[str, str] = {
    "provider": "embedding.provider",
    "model": "embedding.model",
    "batch_size": "embedding.batch_size",
    "base_url": "embedding.base_url",
    "api_key": "embedding.api_key",
    "collection": "milvus.collection",
    "milvus_uri": "milvus.uri",
    "milvus_token": "milvus.token",
    "lock_timeout": "milvus.lock_timeout",
    "llm_provider": "llm.provider",
    "llm_model": "llm.model",
    "llm_base_url": "llm.base_url",
    "llm_api_key": "llm.api_key",
    "prompt_file": "prompts.compact",
    "max_chunk_size": "chunking.max_chunk_size",
    "overlap_lines": "chunking.overlap_lines",
    "debounce_ms": "watch.debounce_ms",
    "reranker_model": "reranker.model",
}


#: Click parameter name -> dotted config key, for flags that only supply a default: any config file
#: and the matching plain flag beat them (``--default-collection`` yields to ``milvus.collection``
#: in a file and to ``--collection``), as in the original, whose plugins pass it on every call.
DEFAULT_FLAG_KEYS: dict[str, str] = {
    "default_collection": "milvus.collection",
}


def overrides_from_flags(flags: Mapping[str, Any], table: Mapping[str, str] = FLAG_KEYS) -> dict[str, Any]:
    """The nested override dict for :func:`resolve_config` from a command's Click parameters.

    Names not in ``table`` (default :data:`FLAG_KEYS`) are ignored (so a command can pass all its
    parameters) and ``None`` means the flag was not given. ``ignore_files``/``exclude`` extend lists
    rather than replace them; see :func:`merge_list_flags`.
    """
    overrides: dict[str, Any] = {}
    for name, value in flags.items():
        key = table.get(name)
        if key is not None and value is not None:
            _set_path(overrides, key.split("."), value)
    return overrides


def merge_list_flags(
    cfg: MemSearchConfig, ignore_files: Iterable[str] = (), exclude: Iterable[str] = ()
) -> MemSearchConfig:
    """Append ``--ignore-file``/``--exclude`` values to the configured lists (config first, no
    duplicates, order kept). Updates ``cfg`` in place and returns it."""
    cfg.indexing.ignore_files = list(dict.fromkeys([*cfg.indexing.ignore_files, *ignore_files]))
    cfg.indexing.exclude = list(dict.fromkeys([*cfg.indexing.exclude, *exclude]))
    return cfg


def config_from_flags(flags: Mapping[str, Any], *, cwd: Path | None = None) -> MemSearchConfig:
    """Resolve the config for a command: its flags as overrides, then the list flags appended."""
    cfg = resolve_config(
        overrides_from_flags(flags), defaults=overrides_from_flags(flags, DEFAULT_FLAG_KEYS), cwd=cwd
    )
    return merge_list_flags(cfg, flags.get("ignore_files") or (), flags.get("exclude") or ())


# --- secrets -------------------------------------------------------------------------------------


def is_secret_key(key: str) -> bool:
    """Whether a dotted key names a secret (its last part is in :data:`SECRET_FIELDS`)."""
    return key.rsplit(".", 1)[-1] in SECRET_FIELDS


def mask_value(value: Any) -> Any:
    """``********`` for a non-empty secret; an ``env:`` reference is a name, not a secret, and is kept."""
    if isinstance(value, str) and value and not value.startswith("env:"):
        return MASK
    return value


def mask_secrets(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with every secret field masked (see :func:`mask_value`)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out[key] = mask_secrets(value)
        elif key in SECRET_FIELDS:
            out[key] = mask_value(value)
        else:
            out[key] = _copy(value)
    return out


# --- get / set -----------------------------------------------------------------------------------


def _canonical_parts(key: str) -> list[str]:
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "plugins":
        parts[1] = _aliases(PluginsConfig).get(parts[1], parts[1])
    return parts


def get_config_value(key: str, cfg: MemSearchConfig | None = None) -> Any:
    """The resolved value at a dotted key; a partial key (``milvus``) returns a dict."""
    data = config_to_dict(cfg if cfg is not None else resolve_config())
    value = _get_path(data, ".".join(_canonical_parts(key)))
    if value is _MISMATCH:
        raise ConfigKeyError(
            f"Unknown config key: {key}", hint="Run 'memsearch config list' to see all keys."
        )
    return value


def _lookup_key(key: str) -> tuple[list[str], Any]:
    """Validate a full dotted key for ``config set``: (canonical parts, the field's type)."""
    parts = _canonical_parts(key)
    if len(parts) < 2 or not all(parts):
        raise ConfigValueError(
            f"Key must be section.field (got '{key}')", hint="For example: chunking.max_chunk_size"
        )
    section = parts[0]
    if section not in SECTIONS:
        raise ConfigKeyError(
            f"Unknown config section: {section}", hint=f"Valid sections: {', '.join(SECTIONS)}"
        )
    if section == "plugins":
        return parts, _lookup_plugin_key(key, parts)
    if section == "llm" and parts[1] == "providers":
        if len(parts) != 4:
            raise ConfigValueError(
                f"LLM provider keys must be llm.providers.<name>.<field> (got '{key}')",
                hint="For example: llm.providers.fast.model",
            )
        provider_fields = _schema(LLMProviderConfig)
        if parts[3] not in provider_fields:
            raise ConfigKeyError(
                f"Unknown LLM provider field: {parts[3]}", hint=f"Valid fields: {', '.join(provider_fields)}"
            )
        return parts, provider_fields[parts[3]][1]
    section_fields = {
        k: tp
        for k, (_attr, tp) in _schema(_schema(MemSearchConfig)[section][1]).items()
        if not _is_mapping(tp)
    }
    name = ".".join(parts[1:])
    if name not in section_fields:
        raise ConfigKeyError(
            f"Unknown config field: {name} in section {section}",
            hint=f"Valid fields in [{section}]: {', '.join(section_fields)}",
        )
    return parts, section_fields[name]


def _lookup_plugin_key(key: str, parts: list[str]) -> Any:
    if len(parts) != 4:
        raise ConfigValueError(
            f"Plugin config keys must be plugins.<platform>.<task>.<field> (got '{key}')",
            hint="For example: plugins.claude-code.summarize.enabled",
        )
    _plugins, platform, task, name = parts
    if platform not in PLUGIN_PLATFORMS:
        raise ConfigKeyError(
            f"Unknown plugin platform: {platform}", hint=f"Valid platforms: {', '.join(PLUGIN_PLATFORMS)}"
        )
    tasks = _schema(PluginPlatformConfig)
    if task not in tasks:
        raise ConfigKeyError(
            f"Unknown plugin config section: {task} in platform {platform}",
            hint=f"Valid sections: {', '.join(tasks)}",
        )
    task_fields = _schema(tasks[task][1])
    if name not in task_fields:
        raise ConfigKeyError(
            f"Unknown plugin {task} field: {name} in platform {platform}",
            hint=f"Valid fields: {', '.join(task_fields)}",
        )
    return task_fields[name][1]


def parse_value(key: str, value: Any) -> Any:
    """Validate ``key`` and convert ``value`` to its type, as ``config set`` does (``env:`` kept)."""
    parts, tp = _lookup_key(key)
    if _is_env_ref(value):
        return value.strip()
    converted = _coerce(tp, value, parts[-1])
    _check_range(parts[-1], converted, ".".join(parts))
    return converted


def set_config_value(key: str, value: Any, *, project: bool = False, cwd: Path | None = None) -> Path:
    """Validate ``key``, convert ``value`` to its type, and write it to the global or project file.

    Text is converted by the field's type: integers, booleans (``true/false``, ``yes/no``,
    ``on/off``, ``1/0``), lists (a JSON array, or comma-separated text). An ``env:VAR`` reference is
    stored as written for any field. With ``project=True`` only :data:`PROJECT_ALLOWED_KEYS` may be
    set. The rest of the file is kept. Returns the file written.
    """
    parts, _tp = _lookup_key(key)
    dotted = ".".join(parts)
    if project and dotted not in PROJECT_ALLOWED_KEYS:
        raise ConfigValueError(
            f"Project config cannot set trusted key '{key}'; "
            "use global config or an explicit CLI flag instead",
            hint=f"A project file may set only: {', '.join(PROJECT_ALLOWED_KEYS)}.",
        )
    converted = parse_value(dotted, value)
    if parts[0] == "compact":
        logger.warning("'%s' is deprecated; use '%s' instead", dotted, COMPACT_KEY_MOVES[parts[1]])
    target = project_config_target(cwd) if project else global_config_path()
    data = load_config_file(target)
    _set_path(data, parts, converted)
    save_config(data, target)
    return target
