"""The packaged LLM prompts, and the one function that loads them.

This package owns the built-in prompt texts (``<name>.txt`` beside this file, shipped as package
data) and :func:`load_prompt`. Each prompt lives here exactly once: ``compact`` and ``summarize``, and
the agent plugins load theirs through :func:`load_prompt` instead of keeping copies that drift apart.

Placeholders: the compact template marks the chunk text with ``{chunks}`` (filled by
``memsearch.compact``); the summarize prompt names the agent with ``{{AGENT_NAME}}`` (filled here).
A user's prompt file (``prompts.<name>`` in the config) replaces the built-in text and gets the same
substitution.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from memsearch.errors import ConfigKeyError, ConfigValueError

__all__ = ["AGENT_NAME_PLACEHOLDER", "load_prompt", "prompt_names"]

AGENT_NAME_PLACEHOLDER = "{{AGENT_NAME}}"
_SUFFIX = ".txt"


def prompt_names() -> list[str]:
    """The names of the built-in prompts (``compact``, ``summarize``, ...), sorted."""
    return sorted(
        entry.name.removesuffix(_SUFFIX)
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(_SUFFIX)
    )


def load_prompt(
    name: str, *, agent_name: str | None = None, override_path: str | os.PathLike[str] | None = None
) -> str:
    """The text of prompt ``name``: from ``override_path`` when given, else the built-in one.

    ``agent_name`` replaces every ``{{AGENT_NAME}}``; without it the placeholder is left as written.
    An unknown ``name`` raises :class:`ConfigKeyError` listing the valid ones; an override file that
    is missing or not UTF-8 raises :class:`ConfigValueError` (a configured prompt that silently fell
    back to the built-in one would hide the mistake).
    """
    names = prompt_names()
    if name not in names:
        raise ConfigKeyError(f"Unknown prompt: {name}", hint=f"Built-in prompts: {', '.join(names)}")
    if override_path:
        text = _read_override(name, Path(override_path).expanduser())
    else:
        text = resources.files(__name__).joinpath(name + _SUFFIX).read_text(encoding="utf-8")
    if agent_name is not None:
        text = text.replace(AGENT_NAME_PLACEHOLDER, agent_name)
    return text


def _read_override(name: str, path: Path) -> str:
    setting = f"prompts.{name}"
    if not path.is_file():
        raise ConfigValueError(
            f"Prompt file not found: {path}",
            hint=f"Fix the path in {setting}, or clear it to use the built-in prompt.",
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigValueError(
            f"Prompt file {path} is not valid UTF-8 (byte {exc.start})",
            hint=f"Save the file as UTF-8, or clear {setting} to use the built-in prompt.",
        ) from None
    except OSError as exc:
        raise ConfigValueError(
            f"Cannot read prompt file {path}: {exc.strerror or exc}",
            hint=f"Check the file's permissions, or clear {setting}.",
        ) from None
