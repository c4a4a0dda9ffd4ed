"""Installers for hosts whose hooks live in the user's own configuration (Codex).

``plugins/codex/install.sh`` is one line that runs ``memsearch hook codex install``; the work is
here, idempotent (re-running it after an update changes nothing but what changed):

1. the skills are copied to ``~/.agents/skills/<name>`` with ``__INSTALL_DIR__`` and
   ``__MEMSEARCH__`` replaced by real paths (copies, never symlinks that
   keep placeholders);
2. ``$CODEX_HOME/hooks.json`` (default ``~/.codex``) gets one entry per event pointing at the
   plugin's shim, after removing earlier memsearch entries; other hooks are kept, the previous file
   is saved as ``hooks.json.bak``, a legacy list-shaped file is converted, and the write is atomic;
3. ``config.toml`` gets ``[features] hooks = true`` (``codex_hooks`` is its deprecated alias and is
   removed), the rest of the file untouched.

Nothing is changed when ``config.toml`` or ``hooks.json`` cannot be parsed: the error says which file.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memsearch.config.envvars import env_flag
from memsearch.errors import ConfigError
from memsearch.files import atomic_write

__all__ = [
    "CODEX_HOOKS",
    "doctor_codex",
    "enable_codex_hooks_feature",
    "install_codex",
    "install_skills",
    "memsearch_command",
    "merge_codex_hooks",
]

INSTALL_DIR_PLACEHOLDER = "__INSTALL_DIR__"
MEMSEARCH_PLACEHOLDER = "__MEMSEARCH__"

#: Codex hook event → (our event, timeout in seconds). Codex 0.171.0 clamps a SessionEnd hook's
#: timeout to 3 s (and warns about a larger one).
CODEX_HOOKS: dict[str, tuple[str, int]] = {
    "SessionStart": ("session-start", 30),
    "UserPromptSubmit": ("prompt-submit", 10),
    "Stop": ("stop", 30),
    "SessionEnd": ("session-end", 3),
}
#: Set to 1 to leave trusting the hooks to the user (Codex's ``/hooks`` screen).
NO_TRUST_ENV = "MEMSEARCH_CODEX_NO_TRUST"
#: Substrings of the commands of earlier memsearch installs (ours and the original's shell hooks).
_CODEX_MARKERS = ("plugins/codex/hooks/", "memsearch hook codex")

_TABLE_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ARRAY_TABLE_RE = re.compile(r"^\s*\[\[")
_HOOKS_KEY_RE = re.compile(r"^\s*(codex_hooks|hooks)\s*=")


def memsearch_command() -> str:
    """How a shell runs *this* memsearch install: its console script, else ``python -m memsearch``."""
    script = Path(sys.executable).with_name("memsearch")
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m memsearch"


def install_skills(source: Path, target: Path, replacements: Mapping[str, str]) -> list[str]:
    """Copy each skill folder of ``source`` into ``target`` (replacing an older copy), with the
    placeholders in its text files replaced. Returns the skill names."""
    names = []
    for skill in sorted(p for p in source.iterdir() if (p / "SKILL.md").is_file()):
        dest = target / skill.name
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(skill, dest)
        for path in dest.rglob("*.md"):
            text = path.read_text(encoding="utf-8")
            for placeholder, value in replacements.items():
                text = text.replace(placeholder, value)
            path.write_text(text, encoding="utf-8")
        names.append(skill.name)
    return names


def _from_legacy(entries: Sequence[Any]) -> dict[str, Any]:
    """A list-shaped hooks file (``[{event, command, timeout_ms, matcher}]``) as the nested form."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("event") or not entry.get("command"):
            continue
        hook: dict[str, Any] = {"type": "command", "command": entry["command"]}
        if isinstance(entry.get("timeout_ms"), (int, float)):
            hook["timeout"] = max(1, math.ceil(entry["timeout_ms"] / 1000))
        hooks.setdefault(str(entry["event"]), []).append(
            {"matcher": entry.get("matcher", ""), "hooks": [hook]}
        )
    return {"hooks": hooks}


def _is_ours(hook: Any, extra_markers: Sequence[str]) -> bool:
    command = hook.get("command", "") if isinstance(hook, dict) else ""
    return isinstance(command, str) and any(m in command for m in (*_CODEX_MARKERS, *extra_markers))


def merge_codex_hooks(
    data: Any, commands: Mapping[str, tuple[str, int]], extra_markers: Sequence[str] = ()
) -> dict[str, Any]:
    """``data`` (a parsed hooks.json) with ``commands`` (host event → (command, timeout)) in it and
    earlier memsearch hooks gone; every other hook is kept in place.

    An earlier memsearch hook is updated where it stands rather than moved to the end: Codex
    0.171.0 keys a hook's trust by its position (``<file>:<event>:<group>:<handler>``), so moving
    ours would shift the user's own hooks to keys trusted for different contents.
    """
    merged = _from_legacy(data) if isinstance(data, list) else dict(data or {})
    hooks = merged.get("hooks")
    hooks = dict(hooks) if isinstance(hooks, dict) else {}
    for event, groups in list(hooks.items()):
        ours = commands.get(event)
        kept = []
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, dict):
                kept.append(group)
                continue
            inner = []
            for hook in group.get("hooks") or []:
                if not _is_ours(hook, extra_markers):
                    inner.append(hook)
                elif ours is not None:  # the first earlier entry of ours is updated where it is
                    inner.append(_command_hook(*ours))
                    ours = None
            if inner:
                kept.append({**group, "hooks": inner})
        if ours is not None:
            kept.append({"matcher": "", "hooks": [_command_hook(*ours)]})
        hooks[event] = kept
    for event, (command, timeout) in commands.items():
        if event not in hooks:
            hooks[event] = [{"matcher": "", "hooks": [_command_hook(command, timeout)]}]
    merged["hooks"] = {event: groups for event, groups in hooks.items() if groups}
    return merged


def _command_hook(command: str, timeout: int) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout}


def enable_codex_hooks_feature(text: str) -> str:
    """``config.toml`` text with ``hooks = true`` in ``[features]`` (added if missing) and any
    ``codex_hooks`` line there removed; everything else kept as written."""
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if (m := _TABLE_RE.match(line)) and m.group(1) == "features"), None
    )
    if start is None:
        body = text.rstrip("\n")
        return (body + "\n\n" if body else "") + "[features]\nhooks = true\n"
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if _TABLE_RE.match(lines[i]) or _ARRAY_TABLE_RE.match(lines[i])
        ),
        len(lines),
    )
    table = [line for line in lines[start + 1 : end] if not _HOOKS_KEY_RE.match(line)]
    return "\n".join([*lines[: start + 1], "hooks = true", *table, *lines[end:]]) + "\n"


def _load_toml(path: Path) -> str:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"cannot update {path}: it is not valid TOML ({exc})",
            hint="fix the file (Codex cannot read it either), then run the installer again",
        ) from None
    return text


def _check_feature(text: str, path: Path) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    features = tomllib.loads(text).get("features")
    if not isinstance(features, dict) or features.get("hooks") is not True:
        raise ConfigError(
            f"could not switch on Codex hooks in {path} (an unusual [features] layout)",
            hint="add `hooks = true` under [features] in that file by hand",
        )


def install_codex(plugin_dir: Path, *, home: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """Install the Codex hooks and skills for the plugin at ``plugin_dir``; returns a report."""
    env = os.environ if env is None else env
    home = home or Path.home()
    plugin_dir = plugin_dir.expanduser().resolve()
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex").expanduser()
    hooks_file = codex_home / "hooks.json"
    config_file = codex_home / "config.toml"
    shim = plugin_dir / "hooks" / "run.sh"
    if not shim.is_file():
        raise ConfigError(f"{shim} not found", hint="pass the plugins/codex folder as --plugin-dir")

    config_text = _load_toml(config_file)  # validate both files before changing anything
    try:
        hooks_data = json.loads(hooks_file.read_text(encoding="utf-8")) if hooks_file.exists() else {}
    except ValueError as exc:
        raise ConfigError(
            f"cannot update {hooks_file}: it is not valid JSON ({exc})",
            hint="fix or remove the file, then run the installer again",
        ) from None

    skills = install_skills(
        plugin_dir / "skills",
        home / ".agents" / "skills",
        {INSTALL_DIR_PLACEHOLDER: str(plugin_dir), MEMSEARCH_PLACEHOLDER: memsearch_command()},
    )
    python = shlex.quote(sys.executable)
    commands = {
        event: (f"bash {shlex.quote(str(shim))} {name} {python}", timeout)
        for event, (name, timeout) in CODEX_HOOKS.items()
    }
    if hooks_file.exists():
        shutil.copy2(hooks_file, hooks_file.with_name("hooks.json.bak"))
    merged = merge_codex_hooks(hooks_data, commands, extra_markers=(str(shim),))
    atomic_write(hooks_file, json.dumps(merged, indent=2) + "\n")
    new_config = enable_codex_hooks_feature(config_text)
    _check_feature(new_config, config_file)
    if new_config != config_text:
        atomic_write(config_file, new_config)
    return "\n".join(
        [
            f"memsearch hooks for Codex installed in {hooks_file} ({', '.join(CODEX_HOOKS)})",
            f"Codex hooks switched on in {config_file} ([features] hooks = true)",
            f"skills copied to {home / '.agents' / 'skills'}: {', '.join(skills)}",
            _trust_step(env, home, str(shim)),
            "Start a new Codex session to load them.",
        ]
    )


#: What the user does when the installer could not record trust itself.
TRUST_BY_HAND = (
    "start `codex`, open `/hooks` and trust the memsearch hooks (or run this installer again where "
    "`codex` is on PATH); `memsearch hook codex doctor` checks"
)


def _trust_step(env: Mapping[str, str], home: Path, shim: str) -> str:
    """Trust the memsearch hooks through Codex itself; one line saying what happened.

    Codex 0.171.0 skips hooks the user has not trusted, silently in ``codex exec``. Running this
    installer is the user's approval of the hooks it writes, so it records that approval the way
    Codex's ``/hooks`` screen does (see :mod:`memsearch.agent.hooks.codex_app`);
    ``MEMSEARCH_CODEX_NO_TRUST=1`` leaves it to the user.
    """
    from memsearch.agent.hooks.codex_app import CodexAppError, codex_executable, trust_our_hooks

    skipped = "; Codex skips them until you " + TRUST_BY_HAND
    if env_flag(NO_TRUST_ENV, env):
        return f"NOTE: hooks not trusted by the installer ({NO_TRUST_ENV} is set){skipped}"
    codex = codex_executable(env)
    if codex is None:
        return f"NOTE: `codex` is not on PATH, so the hooks are not trusted yet{skipped}"
    try:
        hooks = trust_our_hooks(codex, env, home, [shim])
    except CodexAppError as exc:
        return f"WARNING: could not trust the hooks ({exc.one_line()}){skipped}"
    running = [hook.event for hook in hooks if hook.runs]
    if len(running) < len(CODEX_HOOKS):
        return f"WARNING: Codex runs only {len(running)} of the {len(CODEX_HOOKS)} memsearch hooks{skipped}"
    return (
        f"hooks trusted in Codex's config.toml (hooks.state), as Codex's /hooks screen records it ({codex})"
    )


def doctor_codex(*, home: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """Whether Codex will run the memsearch hooks: installed, switched on, and trusted — as Codex
    itself reports them (``codex app-server`` ``hooks/list``). Raises :class:`ConfigError` listing
    what is wrong, so the command exits non-zero."""
    from memsearch.agent.hooks.codex_app import CodexAppError, asked, codex_executable, our_hooks

    env = os.environ if env is None else env
    home = home or Path.home()
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex").expanduser()
    codex = codex_executable(env)
    if codex is None:
        raise ConfigError("`codex` is not on PATH", hint="install Codex, or run this where it is on PATH")
    try:
        hooks = our_hooks(asked(codex, env, home, lambda app: app.hooks(home)), _CODEX_MARKERS)
    except CodexAppError as exc:
        raise ConfigError(f"could not ask Codex about its hooks: {exc.one_line()}") from None
    lines = [f"{hook.event}: {hook.trust}{'' if hook.enabled else ', disabled'}" for hook in hooks]
    problems = []
    found = {hook.event.lower() for hook in hooks}
    missing = [event for event in CODEX_HOOKS if event.lower() not in found]
    if missing:
        problems.append(f"not installed in {codex_home / 'hooks.json'}: {', '.join(missing)}")
    blocked = [
        f"{hook.event} ({hook.trust if hook.enabled else 'disabled'})" for hook in hooks if not hook.runs
    ]
    if blocked:
        problems.append(f"Codex skips {', '.join(blocked)}")
    config_text = _load_toml(codex_home / "config.toml")
    try:
        _check_feature(config_text, codex_home / "config.toml")
    except ConfigError:
        problems.append(f"[features] hooks = true is missing from {codex_home / 'config.toml'}")
    if problems:
        raise ConfigError(
            "memsearch hooks will not run in Codex: " + "; ".join(problems),
            hint=f"re-run plugins/codex/install.sh, or {TRUST_BY_HAND}",
        )
    return "\n".join(["memsearch hooks in Codex (all trusted, Codex runs them):", *lines])
