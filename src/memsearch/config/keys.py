"""What a dotted key names in the settings tree (:mod:`.schema`): its canonical parts and its type.

One reading of ``section.field`` (``plugins.<platform>.<task>.<field>``,
``llm.providers.<name>.<field>``) for every place that takes a key from a person: ``config set``
and ``config get`` (:mod:`.edit`), and the unknown-key warning of a project file (:mod:`.resolve`).
"""

from __future__ import annotations

from typing import Any

from memsearch.config.schema import (
    PLUGIN_PLATFORMS,
    SECTIONS,
    LLMProviderConfig,
    MemSearchConfig,
    PluginPlatformConfig,
    PluginsConfig,
    is_mapping,
    table_aliases,
    table_schema,
)
from memsearch.errors import ConfigError, ConfigKeyError, ConfigValueError


def canonical_parts(key: str) -> list[str]:
    """``key`` split at its dots, a plugin platform in its TOML spelling (``claude_code`` ->
    ``claude-code``)."""
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "plugins":
        parts[1] = table_aliases(PluginsConfig).get(parts[1], parts[1])
    return parts


def lookup_key(key: str) -> tuple[list[str], Any]:
    """Validate a full dotted key for ``config set``: (canonical parts, the field's type)."""
    parts = canonical_parts(key)
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


def is_known_key(dotted: str) -> bool:
    """Whether ``dotted`` names a setting (any spelling :func:`lookup_key` accepts)."""
    try:
        lookup_key(dotted)
    except ConfigError:
        return False
    return True
