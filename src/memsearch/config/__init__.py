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
4. overrides (CLI flags, through ``memsearch.cli.flags.FLAG_KEYS``).

Then ``env:VAR`` strings are replaced by environment variables (except under ``llm.providers``, which
are resolved only when that provider is used, so an unused provider with an unset variable breaks
nothing) and every value is converted to its field's type. Files are validated as they are read, so
a wrong type names the file, the key and the expected type; unknown keys are logged and ignored.

Only the standard library is imported at module level (TOML parsing and writing are imported when a
file is read or written), so every command can afford to read its configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.config.checking import check_range, coerce
from memsearch.config.env import is_env_ref, resolve_env_ref
from memsearch.config.files import (
    filter_project_config,
    find_project_config,
    global_config_path,
    load_config_file,
    memsearch_home,
    project_config_target,
    save_config,
    update_config_file,
)
from memsearch.config.resolve import config_to_dict, default_model_for, merged_file_config, resolve_config
from memsearch.config.schema import (
    COMPACT_KEY_MOVES,
    DEFAULT_COLLECTION,
    DEFAULT_MILVUS_URI,
    DEFAULT_PROVIDER,
    LLM_DEFAULT_MODELS,
    PLUGIN_PLATFORMS,
    PLUGIN_TASKS,
    PROJECT_ALLOWED_KEYS,
    PROJECT_CONFIG_NAME,
    SECRET_FIELDS,
    SECTIONS,
    ChunkingConfig,
    CompactConfig,
    ConfigOrigin,
    EmbeddingConfig,
    IndexingConfig,
    LLMConfig,
    LLMProviderConfig,
    MemSearchConfig,
    MilvusConfig,
    PluginMaintenanceTaskConfig,
    PluginMemoryToSkillConfig,
    PluginPlatformConfig,
    PluginRecallConfig,
    PluginsConfig,
    PluginSummarizeConfig,
    PromptsConfig,
    RerankerConfig,
    WatchConfig,
    is_mapping,
    table_aliases,
    table_schema,
)
from memsearch.config.tables import MISSING, copy_value, deep_merge, get_path, set_path
from memsearch.errors import ConfigKeyError, ConfigValueError

__all__ = [
    "COMPACT_KEY_MOVES",
    "DEFAULT_COLLECTION",
    "DEFAULT_MILVUS_URI",
    "DEFAULT_PROVIDER",
    "LLM_DEFAULT_MODELS",
    "MASK",
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
    "WatchConfig",
    "config_to_dict",
    "deep_merge",
    "default_model_for",
    "filter_project_config",
    "find_project_config",
    "get_config_value",
    "global_config_path",
    "is_secret_key",
    "load_config_file",
    "lookup_key",
    "mask_secrets",
    "mask_value",
    "memsearch_home",
    "merged_file_config",
    "parse_value",
    "project_config_target",
    "resolve_config",
    "resolve_env_ref",
    "save_config",
    "set_config_value",
    "set_path",
    "update_config_file",
]

logger = logging.getLogger("memsearch.config")


#: What a masked secret looks like in ``config list`` / ``config get`` output.
MASK = "********"


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
            out[key] = copy_value(value)
    return out


# --- get / set -----------------------------------------------------------------------------------


def _canonical_parts(key: str) -> list[str]:
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "plugins":
        parts[1] = table_aliases(PluginsConfig).get(parts[1], parts[1])
    return parts


def get_config_value(key: str, cfg: MemSearchConfig | None = None) -> Any:
    """The resolved value at a dotted key; a partial key (``milvus``) returns a dict."""
    data = config_to_dict(cfg if cfg is not None else resolve_config())
    value = get_path(data, ".".join(_canonical_parts(key)))
    if value is MISSING:
        raise ConfigKeyError(
            f"Unknown config key: {key}", hint="Run 'memsearch config list' to see all keys."
        )
    return value


def lookup_key(key: str) -> tuple[list[str], Any]:
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
        provider_fields = table_schema(LLMProviderConfig)
        if parts[3] not in provider_fields:
            raise ConfigKeyError(
                f"Unknown LLM provider field: {parts[3]}", hint=f"Valid fields: {', '.join(provider_fields)}"
            )
        return parts, provider_fields[parts[3]][1]
    section_fields = {
        k: tp
        for k, (_attr, tp) in table_schema(table_schema(MemSearchConfig)[section][1]).items()
        if not is_mapping(tp)
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
    tasks = table_schema(PluginPlatformConfig)
    if task not in tasks:
        raise ConfigKeyError(
            f"Unknown plugin config section: {task} in platform {platform}",
            hint=f"Valid sections: {', '.join(tasks)}",
        )
    task_fields = table_schema(tasks[task][1])
    if name not in task_fields:
        raise ConfigKeyError(
            f"Unknown plugin {task} field: {name} in platform {platform}",
            hint=f"Valid fields: {', '.join(task_fields)}",
        )
    return task_fields[name][1]


def parse_value(key: str, value: Any) -> Any:
    """Validate ``key`` and convert ``value`` to its type, as ``config set`` does (``env:`` kept)."""
    parts, tp = lookup_key(key)
    if is_env_ref(value):
        return value.strip()
    converted = coerce(tp, value, parts[-1])
    check_range(parts[-1], converted, ".".join(parts))
    return converted


def set_config_value(key: str, value: Any, *, project: bool = False, cwd: Path | None = None) -> Path:
    """Validate ``key``, convert ``value`` to its type, and write it to the global or project file.

    Text is converted by the field's type: integers, booleans (``true/false``, ``yes/no``,
    ``on/off``, ``1/0``), lists (a JSON array, or comma-separated text). An ``env:VAR`` reference is
    stored as written for any field. With ``project=True`` only :data:`PROJECT_ALLOWED_KEYS` may be
    set. The rest of the file is kept. Returns the file written.
    """
    parts, _tp = lookup_key(key)
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
    set_path(data, parts, converted)
    save_config(data, target)
    return target
