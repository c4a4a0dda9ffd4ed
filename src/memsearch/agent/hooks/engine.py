"""Running one hook: platform × event lookup, stdin, the handler, the host's reply — and never
breaking the host's session.

``memsearch hook <platform> <event>`` calls :func:`run_hook`; a detached capture worker calls
:func:`run_worker`; the skills and installers use the actions (:data:`ACTIONS`). Contracts:

- ``MEMSEARCH_DISABLE=1`` answers ``{}`` before stdin is read or anything is imported: it is set
  on every nested agent call, so the plugin never re-enters itself.
- stdin is read with a deadline (some hosts never close the pipe) and may be empty or not JSON:
  the hook then works with what it has and says so on stderr.
- An expected error becomes a ``systemMessage`` at session start (the user sees why memory is
  off) and a stderr line elsewhere; an unexpected one is reported the same way. The exit code is 0
  either way: a memory plugin must not block or fail the user's turn.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsearch.agent.hooks.base import HookContext, HookInput, Platform, PlatformAction, Reply, disabled
from memsearch.errors import HookUsageError, MemSearchError

__all__ = [
    "ACTIONS",
    "EVENT_ALIASES",
    "HookUsageError",
    "actions_of",
    "canonical_event",
    "disabled",
    "get_platform",
    "is_action",
    "parse_stdin",
    "read_stdin",
    "run_action",
    "run_hook",
    "run_worker",
]

#: Seconds to wait for the host to finish writing stdin (the original's cap was 2 s).
STDIN_TIMEOUT = 2.0

#: Host spellings of our event names (``SessionStart``, ``user-prompt-submit``, ...).
EVENT_ALIASES: dict[str, str] = {
    "sessionstart": "session-start",
    "userpromptsubmit": "prompt-submit",
    "promptsubmit": "prompt-submit",
    "stop": "stop",
    "sessionend": "session-end",
}


def get_platform(name: str) -> Platform:
    from memsearch.agent.hooks.platforms import PLATFORMS

    platform = PLATFORMS.get(name)
    if platform is None:
        raise HookUsageError(
            f"unknown platform '{name}'", hint=f"valid platforms: {', '.join(sorted(PLATFORMS))}"
        )
    return platform


def canonical_event(platform: Platform, event: str) -> str:
    """Our name for ``event`` (host spellings accepted), if ``platform``'s host sends it."""
    name = EVENT_ALIASES.get(event.replace("-", "").replace("_", "").lower(), event)
    if name not in platform.events:
        from memsearch.agent.hooks.platforms import ROWS

        owners = [row.name for row in ROWS if event in row.actions]
        if owners:  # another host's action (``memsearch hook claude-code daemon``)
            raise HookUsageError(f"only the {', '.join(owners)} platform has the '{event}' action")
        raise HookUsageError(
            f"{platform.name} has no hook event '{event}'",
            hint=f"valid events: {', '.join(platform.events)}; actions: {', '.join(actions_of(platform))}",
        )
    return name


# --- stdin ------------------------------------------------------------------------------------


def _complete_json(data: bytes) -> bool:
    stripped = data.rstrip()
    if not stripped.endswith(b"}"):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


def read_stdin(timeout: float = STDIN_TIMEOUT) -> bytes:
    """The host's stdin, read until EOF, a complete JSON object, or ``timeout`` seconds.

    Hosts that never close the pipe (seen on WSL2 and on ``--resume``) would otherwise hang the hook.
    A terminal gives nothing (a person running the hook by hand).
    """
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return b""
    if os.isatty(fd):
        return b""
    if sys.platform == "win32":  # pragma: no cover - select() takes only sockets there
        return sys.stdin.buffer.read()
    import select

    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            break
        chunks.append(data)
        if data.rstrip().endswith(b"}") and _complete_json(b"".join(chunks)):
            break
    return b"".join(chunks)


def parse_stdin(raw: bytes | str | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The stdin object and a warning ("" if none): empty input is ``{}``, as is input that is not a
    JSON object (the hook still runs on what it can find by itself)."""
    if isinstance(raw, Mapping):
        return dict(raw), ""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    if not text.strip():
        return {}, ""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"stdin is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); ignored it"
    except RecursionError:  # arrays or objects nested thousands deep: no hook input looks like that
        return {}, "stdin is JSON nested too deeply to read; ignored it"
    if not isinstance(data, dict):
        return {}, f"stdin is JSON but not an object (a {type(data).__name__}); ignored it"
    return data, ""


# --- running ----------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"memsearch hook: {message}", file=sys.stderr)


def _describe(exc: BaseException) -> str:
    return exc.one_line() if isinstance(exc, MemSearchError) else f"{type(exc).__name__}: {exc}"


def run_hook(
    platform_name: str,
    event: str,
    stdin: bytes | str | Mapping[str, Any] = b"",
    *,
    env: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
) -> str:
    """Run one hook and return what the host reads on stdout.

    Raises :class:`HookUsageError` only for an unknown platform or event; every other failure is
    folded into the reply (see the module docstring).
    """
    from memsearch.agent.hooks.events import EVENTS

    env = os.environ if env is None else env
    if disabled(env):
        return "{}"
    platform = get_platform(platform_name)
    name = canonical_event(platform, event)
    data, warning = parse_stdin(stdin)
    if warning:
        _log(warning)
    elif not data and name == "stop":
        _log(f"no hook input on stdin (nothing within {STDIN_TIMEOUT:g} s); nothing to capture")
    hook_input = platform.read_input(data)
    try:
        ctx = HookContext.build(platform, name, hook_input, env, now)
        reply = EVENTS[name](ctx)
    except Exception as exc:  # a hook must never break the host's session
        _log(f"{name} failed: {_describe(exc)}")
        reply = Reply(f"[memsearch] Error: {_describe(exc)}") if name == "session-start" else Reply()
    return platform.render(platform.events[name], reply)


def run_worker(platform_name: str, payload: bytes | str, *, env: Mapping[str, str] | None = None) -> bool:
    """Finish a capture handed over by a detached Stop (see ``events.stop``). True if written."""
    from memsearch.agent.hooks.base import Capture
    from memsearch.agent.hooks.events import finish_detached

    platform = get_platform(platform_name)
    try:
        data = json.loads(payload)
        ctx = HookContext.from_json(platform, data["context"], env)
        raw = data.get("capture")
        return finish_detached(ctx, Capture.from_json(raw) if raw else None)
    except Exception as exc:
        _log(f"capture worker failed: {_describe(exc)}")
        return False


# --- actions (not host events) ----------------------------------------------------------------


def _action_context(platform: Platform) -> HookContext:
    return HookContext.build(platform, "action", HookInput())


def _collection(platform: Platform, _options: Mapping[str, Any]) -> str:
    return _action_context(platform).collection


def _memory_dir(platform: Platform, _options: Mapping[str, Any]) -> str:
    return str(_action_context(platform).memory_dir)


def _install(platform: Platform, options: Mapping[str, Any]) -> str:
    if platform.installer is None:
        from memsearch.agent.hooks.platforms import INSTALLERS

        raise HookUsageError(
            f"{platform.name} has no installer",
            hint=f"installers exist for: {', '.join(sorted(INSTALLERS)) or 'none'}",
        )
    plugin_dir = options.get("plugin_dir")
    if plugin_dir is None:
        raise HookUsageError("install needs --plugin-dir", hint="run the platform's install.sh")
    return platform.installer(Path(plugin_dir))


def _doctor(platform: Platform, _options: Mapping[str, Any]) -> str:
    if platform.doctor is None:
        from memsearch.agent.hooks.platforms import DOCTORS

        raise HookUsageError(
            f"{platform.name} has no doctor", hint=f"doctors exist for: {', '.join(sorted(DOCTORS))}"
        )
    return platform.doctor()


#: Commands every platform has, for skills and installers: ``memsearch hook <platform> <action>``.
#: They read no stdin. A host's own commands are in its row (``Platform.actions``).
ACTIONS: dict[str, PlatformAction] = {
    "collection": _collection,
    "memory-dir": _memory_dir,
    "install": _install,
    "doctor": _doctor,
}


def actions_of(platform: Platform) -> dict[str, PlatformAction]:
    """The shared actions and the host's own."""
    return {**ACTIONS, **platform.actions}


def is_action(platform_name: str, name: str) -> bool:
    """Whether ``memsearch hook <platform_name> <name>`` names an action rather than an event.

    Event names never look up the rows, so an ordinary hook (and ``MEMSEARCH_DISABLE=1``) imports
    no adapter before it must; an unknown platform is left to the event path, which reports it.
    """
    if name in ACTIONS:
        return True
    if name.replace("-", "").replace("_", "").lower() in EVENT_ALIASES:
        return False
    from memsearch.agent.hooks.platforms import PLATFORMS

    platform = PLATFORMS.get(platform_name)
    return platform is not None and name in platform.actions


def run_action(platform_name: str, action: str, **options: Any) -> str:
    """Run an action (see :data:`ACTIONS` and ``Platform.actions``) and return its text output."""
    platform = get_platform(platform_name)
    actions = actions_of(platform)
    handler = actions.get(action)
    if handler is None:
        raise HookUsageError(f"unknown action '{action}'", hint=f"valid actions: {', '.join(actions)}")
    return handler(platform, options)
