"""Plain TOML-shaped data (nested dicts of tables): merging, copying, and dotted-key paths.

Every configuration layer is such a dict before it becomes the typed tree (:mod:`.schema`), so
these helpers are shared by the files, the resolution and the editing modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: What :func:`get_path` returns for a key that is not there (``None`` can be a value).
MISSING = object()


def leaves(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """(dotted key, value) for every non-table value; empty tables carry nothing and are skipped."""
    for key, value in data.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def get_path(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def set_path(data: dict[str, Any], parts: list[str], value: Any) -> None:
    """Set a nested key, creating tables on the way (a non-table in the way is replaced)."""
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``override`` merged into ``base``, recursing into tables.

    ``None`` in ``override`` means "not set" and is skipped; an empty string is a value and wins.
    Neither input is modified.
    """
    result: dict[str, Any] = {k: copy_value(v) for k, v in base.items()}
    for key, value in override.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy_value(value)
    return result


def copy_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


def drop_none(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out[key] = drop_none(value)
        elif value is not None:
            out[key] = value
    return out
