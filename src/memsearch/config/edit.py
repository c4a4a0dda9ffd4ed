"""Reading and changing settings: secrets masked for display, ``config get`` and ``config set``.

A dotted key is validated against the settings tree (:func:`lookup_key`) before anything is read
or written, and a value typed by a person is converted to the field's type (:mod:`.checking`).
``config set`` rewrites one file, global or project, keeping the rest of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.config.checking import check_range, coerce
from memsearch.config.env import is_env_ref
from memsearch.config.files import global_config_path, load_config_file, project_config_target, save_config
from memsearch.config.resolve import config_to_dict, resolve_config
from memsearch.config.schema import (
    COMPACT_KEY_MOVES,
    PLUGIN_PLATFORMS,
    PROJECT_ALLOWED_KEYS,
    SECRET_FIELDS,
    SECTIONS,
    LLMProviderConfig,
    MemSearchConfig,
    PluginPlatformConfig,
    PluginsConfig,
    is_mapping,
    table_aliases,
    table_schema,
)
from memsearch.config.tables import MISSING, copy_value, get_path, set_path
from memsearch.errors import ConfigKeyError, ConfigValueError

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
