"""The ``MEMSEARCH_*`` environment variables that hold a yes/no or a number, read strictly.

Why one reader: each module used to parse its own variable its own way (``not in ("", "0")`` read
``MEMSEARCH_NO_SERVICE=false`` as *on*; ``float()`` let ``inf`` and ``nan`` through to a socket
deadline, which then raised ``OverflowError``). Now every such variable is declared once, with its
type and range, in :data:`~memsearch.config.schema.ENV_VARIABLES`, and read here with the same rules
as a setting: a yes/no is one of :data:`~memsearch.config.checking.BOOLEAN_WORDS` (any case), a
number is finite and inside its :data:`~memsearch.config.schema.RANGES` entry. Anything else raises
:class:`~memsearch.errors.ConfigValueError` naming the variable, its value and what is accepted. An
unset or blank variable means "not set". The CLI checks them all before any command runs
(:func:`check_environment`), so a bad value is one ``Error:`` line, not a failure deep in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from memsearch.config.checking import BOOLEAN_WORDS, allowed_range, check_range, parse_bool
from memsearch.config.schema import ENV_VARIABLES
from memsearch.errors import ConfigValueError


def env_setting(name: str, env: Mapping[str, str] | None = None) -> bool | int | float | None:
    """The value of the declared variable ``name`` in ``env`` (default: ``os.environ``), converted
    to its type and checked; None when it is unset or blank."""
    spec = ENV_VARIABLES[name]
    raw = (os.environ if env is None else env).get(name)
    if raw is None or not raw.strip():
        return None
    if spec.type is bool:
        flag = parse_bool(raw)
        if flag is None:
            raise ConfigValueError(
                f"Invalid value for '{name}': {raw!r} is not a yes/no value",
                hint=f"Use {BOOLEAN_WORDS} (any case), or unset it.",
            )
        return flag
    try:
        value: int | float = spec.type(raw.strip())
    except ValueError:
        word = "a whole number" if spec.type is int else "a number"
        raise ConfigValueError(
            f"Invalid value for '{name}': expected {word} (got {raw!r})",
            hint=f"Use a value from {allowed_range(spec.range)}, or unset it.",
        ) from None
    check_range(spec.range, value, name)
    return value


def env_flag(name: str, env: Mapping[str, str] | None = None, *, default: bool = False) -> bool:
    """A yes/no variable; ``default`` when it is unset or blank."""
    value = env_setting(name, env)
    return default if value is None else bool(value)


def env_number(name: str, env: Mapping[str, str] | None = None) -> float | None:
    """A number variable (an ``int`` for whole-number ones); None when it is unset or blank."""
    value = env_setting(name, env)
    return None if value is None else value


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Read every declared variable once, so a bad value fails now, with its name, and not later."""
    for name in ENV_VARIABLES:
        env_setting(name, env)
