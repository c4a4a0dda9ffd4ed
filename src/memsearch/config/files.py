"""Config files: where they are, reading and writing TOML, and what a project file may carry.

The global file ``~/.memsearch/config.toml`` is trusted. A project file ``.memsearch.toml`` is the
nearest one in the working directory or its parents, never above the repository root or the home
directory; it usually arrives with a cloned repository, so only
:data:`~memsearch.config.schema.PROJECT_ALLOWED_KEYS` are taken from it. TOML parsing and writing
are imported only when a file is read or written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.config.schema import PROJECT_ALLOWED_KEYS, PROJECT_CONFIG_NAME
from memsearch.config.tables import deep_merge, get_path, leaves, set_path
from memsearch.errors import ConfigError


def memsearch_home() -> Path:
    """``~/.memsearch``, computed on each call so a changed ``HOME`` (tests, sudo) is honoured."""
    return Path.home() / ".memsearch"


def global_config_path() -> Path:
    """The global (trusted) config file, ``~/.memsearch/config.toml``."""
    return memsearch_home() / "config.toml"


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse one TOML file; a missing file is ``{}``. Malformed TOML raises :class:`ConfigError`."""
    p = Path(path).expanduser()
    if not p.exists():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with p.open("rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"Invalid TOML in {p}: {exc}",
            hint="Fix the syntax at that line, or move the file aside and run 'memsearch config init'.",
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Invalid TOML in {p}: not UTF-8 text (bad byte at offset {exc.start})",
            hint="Save the file as UTF-8.",
        ) from None
    except RecursionError:  # tomllib recurses per level of nested arrays/inline tables
        raise ConfigError(
            f"Invalid TOML in {p}: arrays or tables nested too deeply to read",
            hint="Fix the file, or move it aside and run 'memsearch config init'.",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"Cannot read config file {p}: {exc.strerror or exc}",
            hint="Check that it is a readable file.",
        ) from None
    return data


def save_config(data: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``data`` as TOML, atomically (temp file + ``os.replace``), creating parent directories.

    A reader never sees a half-written file. A new file is private (0600, it may hold keys); an
    existing file keeps its permissions. Comments in the old file are not preserved.
    """
    import tomli_w

    from memsearch.files import atomic_write

    p = Path(path).expanduser()
    text = tomli_w.dumps(dict(data))
    try:
        atomic_write(p, text, private=True, keep_mode=True, fsync=True)
    except OSError as exc:
        raise ConfigError(
            f"Cannot write config file {p}: {exc.strerror or exc}",
            hint="Check the directory's permissions.",
        ) from None


def update_config_file(path: str | os.PathLike[str], updates: Mapping[str, Any]) -> Path:
    """Merge ``updates`` into the file at ``path`` (keys not in ``updates`` are kept) and save it."""
    p = Path(path).expanduser()
    save_config(deep_merge(load_config_file(p), dict(updates)), p)
    return p


def _walk_up(start: Path) -> tuple[Path | None, Path | None]:
    """(nearest project file, repository root) seen walking up from ``start``; see find_project_config."""
    home = Path.home().absolute()
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_CONFIG_NAME
        if candidate.is_file():
            return candidate, None
        if (directory / ".git").exists():
            return None, directory
        if directory == home:
            break
    return None, None


def find_project_config(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The nearest ``.memsearch.toml`` in ``cwd`` or its parents, or None.

    The search stops at the first directory containing ``.git`` (the repository root, which is itself
    searched), at the home directory (searched) and at the filesystem root, so a project never picks
    up a file from outside its repository.
    """
    start = Path(cwd).absolute() if cwd is not None else Path.cwd()
    return _walk_up(start)[0]


def project_config_target(cwd: str | os.PathLike[str] | None = None) -> Path:
    """Where ``config set/init --project`` writes: the nearest existing project file, else a new one
    at the repository root (the first parent with ``.git``), else in ``cwd``."""
    start = Path(cwd).absolute() if cwd is not None else Path.cwd()
    found, repo_root = _walk_up(start)
    if found is not None:
        return found
    return (repo_root or start) / PROJECT_CONFIG_NAME


def filter_project_config(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Split a raw project file into (allowed part, dotted keys that were dropped).

    Dropping is silent by design (the original does the same, and a shared repository may carry
    settings meant for the original's older versions); the list lets ``config list --project`` and
    ``cfg.origin`` say what was ignored.
    """
    allowed: dict[str, Any] = {}
    ignored: list[str] = []
    for dotted, value in leaves(data):
        if dotted in PROJECT_ALLOWED_KEYS:
            set_path(allowed, dotted.split("."), value)
        else:
            ignored.append(dotted)
    # a table where an allowlisted scalar belongs (e.g. [milvus.collection]) must still be type-checked
    for key in PROJECT_ALLOWED_KEYS:
        value = get_path(data, key)
        if isinstance(value, dict) and value:
            set_path(allowed, key.split("."), value)
            ignored = [k for k in ignored if not k.startswith(f"{key}.")]
    return allowed, ignored
