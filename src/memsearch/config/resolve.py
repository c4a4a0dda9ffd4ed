"""Resolving the configuration: the layers merged, ``env:`` references replaced, the typed tree built.

Layers, lowest to highest: dataclass defaults; ``defaults`` given by an integration (a plugin's
per-project collection); the global file; the allowlisted project file; overrides (CLI flags).
Every layer is type-checked before merging (:mod:`.checking`), so a wrong value names its file.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Mapping
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import Any

from memsearch.config.checking import check_range, check_table, coerce
from memsearch.config.env import resolve_env_tree
from memsearch.config.files import (
    filter_project_config,
    find_project_config,
    global_config_path,
    load_config_file,
)
from memsearch.config.keys import is_known_key
from memsearch.config.schema import (
    COMPACT_KEY_MOVES,
    ConfigOrigin,
    MemSearchConfig,
    is_mapping,
    is_table,
    table_schema,
)
from memsearch.config.tables import deep_merge, drop_none
from memsearch.errors import ConfigValueError

logger = logging.getLogger("memsearch.config")


def _build(cls: type, data: Mapping[str, Any], default: Any, prefix: str = "") -> Any:
    """``default`` with the fields present in ``data`` replaced by converted values.

    Starting from the default *instance* keeps per-instance defaults (PROJECT.md vs USER.md). Values
    reach here type-checked, except text from ``env:`` references, which is coerced now.
    """
    changes: dict[str, Any] = {}
    for key, (attr, tp) in table_schema(cls).items():
        if key not in data:
            continue
        value = data[key]
        dotted = f"{prefix}{key}"
        if is_table(tp):
            changes[attr] = _build(tp, value, getattr(default, attr), f"{dotted}.")
        elif is_mapping(tp):
            item_type = typing.get_args(tp)[1]
            changes[attr] = {
                name: _build(item_type, item, item_type(), f"{dotted}.{name}.")
                for name, item in value.items()
            }
        else:
            try:
                converted = coerce(tp, value, key)
            except ConfigValueError as exc:
                raise ConfigValueError(
                    f"Invalid value for '{dotted}' (from an env: reference): {exc.message}",
                    hint="Check the environment variable that the setting's env: reference names.",
                ) from None
            check_range(key, converted, dotted)
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
    global_layer = check_table(MemSearchConfig, raw_global, "", str(gpath))

    ppath = find_project_config(cwd)
    project_layer: dict[str, Any] = {}
    ignored: list[str] = []
    if ppath is not None:
        raw_project = load_config_file(ppath)
        _log_compact_deprecation(raw_project, str(ppath))
        allowed, ignored = filter_project_config(raw_project)
        project_layer = check_table(MemSearchConfig, allowed, "", str(ppath))
        # A key no file may hold is a typo: warned about as in the global file. A real key the
        # allowlist drops is left without a word (a shared repository may set it for itself).
        for key in ignored:
            if not is_known_key(key):
                logger.warning("Unknown config key '%s' in %s (ignored)", key, ppath)
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

    ``overrides`` is a nested dict (the CLI builds it from its flags: ``memsearch.cli.flags``);
    ``None`` values are skipped and unknown keys raise :class:`ConfigKeyError`. ``defaults`` has the
    same shape but yields to every file: it is how an integration supplies a context-derived
    default (a plugin's per-project collection via ``--default-collection``) that a user's explicit
    setting still beats.
    ``cwd`` is where the project-file search starts. Raises :class:`ConfigError` subclasses for
    malformed files, wrong types and unset ``env:`` variables. ``cfg.origin`` records the files used
    and the project keys that were ignored.
    """
    global_layer, project_layer, origin = _read_layers(cwd)
    default_layer, override_layer = (
        check_table(MemSearchConfig, drop_none(layer or {}), "", name, strict_keys=True)
        for layer, name in ((defaults, "defaults"), (overrides, "overrides"))
    )
    merged = deep_merge(deep_merge(deep_merge(default_layer, global_layer), project_layer), override_layer)
    cfg: MemSearchConfig = _build(MemSearchConfig, resolve_env_tree(merged), MemSearchConfig())
    if not cfg.embedding.model:
        cfg.embedding.model = default_model_for(cfg.embedding.provider)
        origin.default_embedding_model = True
    cfg.origin = origin
    return cfg


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain TOML-shaped data (hyphenated plugin platform keys, no ``origin``)."""
    out: dict[str, Any] = {}
    cls: type = type(cfg)
    for key, (attr, _tp) in table_schema(cls).items():
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
