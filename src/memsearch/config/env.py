"""``env:VAR`` references: a setting whose value names an environment variable.

A reference is kept as written in files and by ``config set`` (it is a name, not a secret), and
replaced by the variable's value when the configuration is resolved; under ``llm.providers`` only
when that provider is used, so an unused provider with an unset variable breaks nothing.
"""

from __future__ import annotations

import os
from typing import Any

from memsearch.errors import ConfigEnvVarError


def is_env_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("env:")


def resolve_env_ref(value: Any, *, key: str | None = None) -> Any:
    """Replace an ``env:VAR`` string by the variable's value; anything else is returned unchanged.

    An unset variable raises :class:`ConfigEnvVarError` (a ``KeyError``). ``key`` only improves the
    hint. A set-but-empty variable gives ``""``.
    """
    if not is_env_ref(value):
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


def resolve_env_tree(data: Any, path: tuple[str, ...] = ()) -> Any:
    if path[:2] == ("llm", "providers"):
        return data  # resolved lazily, when that provider is used (LLMProviderConfig.resolved)
    key = ".".join(path)
    if isinstance(data, dict):
        return {k: resolve_env_tree(v, (*path, k)) for k, v in data.items()}
    if isinstance(data, list):
        return [resolve_env_ref(item, key=key) for item in data]
    return resolve_env_ref(data, key=key)
