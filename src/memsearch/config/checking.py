"""Type checking and coercion of setting values against the settings tree (:mod:`.schema`).

A file's values are checked as they are read, so a wrong type names the file, the key and the
expected type; text typed by a person (``memsearch config set``, an environment variable behind
an ``env:`` reference) is converted to the field's type here.
"""

from __future__ import annotations

import json
import logging
import math
import typing
from typing import Any

from memsearch.config.env import is_env_ref
from memsearch.config.schema import RANGES, is_mapping, is_table, table_aliases, table_schema
from memsearch.config.tables import deep_merge
from memsearch.errors import ConfigKeyError, ConfigValueError

logger = logging.getLogger("memsearch.config")

_TYPE_WORDS: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean (true or false)",
    list[str]: "a list of strings",
}


def _describe(tp: Any) -> str:
    if is_table(tp) or is_mapping(tp):
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


def _number(value: float) -> str:
    """A bound or value as a person writes it (``3600000``, not ``3.6e+06``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def allowed_range(name: str) -> str:
    """``1 to 1000000``: the range of a :data:`RANGES` entry, for messages and hints."""
    low, high = RANGES[name]
    return f"{_number(low)} to {_number(high)}"


def check_range(name: str, value: Any, key: str, where: str = "") -> None:
    """Refuse a number that is not finite or lies outside its :data:`RANGES` entry (``name``: the
    field name, or an environment variable's). Every number from a file, a flag, ``config set`` or
    the environment passes here, so a range declared in the schema is enforced everywhere."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    bounds = RANGES.get(name)
    if isinstance(value, float) and not math.isfinite(value):
        problem = "must be a finite number"
    elif bounds is None:
        return
    elif value < bounds[0]:
        problem = f"must be >= {_number(bounds[0])}"
    elif value > bounds[1]:
        problem = f"must be <= {_number(bounds[1])}"
    else:
        return
    allowed = f"Use a value from {allowed_range(name)}." if bounds else "Use a finite number."
    raise ConfigValueError(f"Invalid value for '{key}'{where}: {problem} (got {value})", hint=allowed)


def check_table(
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
    schema = table_schema(cls)
    aliases = table_aliases(cls)
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
    if is_table(tp):
        return check_table(tp, value, f"{key}.", source, strict_keys=strict_keys)
    where = f" in {source}" if source else ""
    if is_mapping(tp):
        if not isinstance(value, dict):
            raise ConfigValueError(
                f"Invalid value for '{key}'{where}: expected a table, got {_kind_of(value)}",
                hint=f"Write each entry as a [{key}.<name>] section.",
            )
        item_type = typing.get_args(tp)[1]
        return {
            name: check_table(item_type, item, f"{key}.{name}.", source, strict_keys=strict_keys)
            for name, item in value.items()
        }
    if is_env_ref(value):
        return value
    checked = _exact(tp, value)
    if checked is _MISMATCH:
        raise ConfigValueError(
            f"Invalid value for '{key}'{where}: expected {_describe(tp)}, got {value!r} ({_kind_of(value)})",
            hint=f"Fix the value{where}, or run: memsearch config set {key} <value>",
        )
    check_range(key.rsplit(".", 1)[-1], checked, key, where)
    return checked


def _valid_hint(cls: type, prefix: str) -> str:
    names = ", ".join(table_schema(cls))
    return f"Valid keys under '{prefix.rstrip('.')}': {names}" if prefix else f"Valid sections: {names}"


_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})

_FALSE_WORDS = frozenset({"0", "false", "no", "off"})

#: The yes/no spellings accepted from text (any case), for hints.
BOOLEAN_WORDS = "true/false, yes/no, on/off or 1/0"


def parse_bool(text: str) -> bool | None:
    """``text`` as a yes/no (:data:`BOOLEAN_WORDS`, any case, surrounding blanks ignored), or None
    when it is none of them. The one reading of yes/no text, for ``config set`` and the environment."""
    word = text.strip().lower()
    return True if word in _TRUE_WORDS else False if word in _FALSE_WORDS else None


def _as_text(item: Any) -> str:
    return item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)


def coerce(tp: Any, value: Any, name: str) -> Any:
    """Turn text (a ``config set`` argument, an environment variable) into the field's type.

    Values that already have the right type pass through. ``name`` is the field name used in the
    messages, which match the original memsearch's wording.
    """
    exact = _exact(tp, value)
    if exact is not _MISMATCH:
        return exact
    text = _as_text(value).strip()
    if tp is bool:
        flag = parse_bool(text)
        if flag is None:
            raise ConfigValueError(
                f"Boolean field '{name}' must be true or false", hint=f"Use {BOOLEAN_WORDS}."
            )
        return flag
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
