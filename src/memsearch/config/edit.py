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
from memsearch.config.keys import canonical_parts, lookup_key
from memsearch.config.resolve import config_to_dict, resolve_config
from memsearch.config.schema import COMPACT_KEY_MOVES, PROJECT_ALLOWED_KEYS, SECRET_FIELDS, MemSearchConfig
from memsearch.config.tables import MISSING, copy_value, get_path, set_path
from memsearch.config.values import check_value
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


def get_config_value(key: str, cfg: MemSearchConfig | None = None) -> Any:
    """The resolved value at a dotted key; a partial key (``milvus``) returns a dict."""
    data = config_to_dict(cfg if cfg is not None else resolve_config())
    value = get_path(data, ".".join(canonical_parts(key)))
    if value is MISSING:
        raise ConfigKeyError(
            f"Unknown config key: {key}", hint="Run 'memsearch config list' to see all keys."
        )
    return value


def parse_value(key: str, value: Any) -> Any:
    """Validate ``key`` and convert ``value`` to its type, as ``config set`` does (``env:`` kept):
    its range, and for a name or an address (a provider, a store URI) what its owner accepts
    (:mod:`.values`), so that a value no command can use is refused when it is set."""
    parts, tp = lookup_key(key)
    if is_env_ref(value):
        return value.strip()
    converted = coerce(tp, value, parts[-1])
    dotted = ".".join(parts)
    check_range(parts[-1], converted, dotted)
    check_value(dotted, converted)
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
