"""Asking Codex itself about its hooks: ``codex app-server`` over stdio (JSON-RPC, one JSON a line).

Why: Codex 0.171.0 runs a hook from ``hooks.json`` only when the user has trusted it — its
``config.toml`` holds ``[hooks.state."<hooks.json path>:<event>:<group>:<handler>"] trusted_hash``,
a sha256 of the hook's normalised contents — and skips an untrusted hook without a word (``codex
exec``; the TUI shows "hooks need review"). Both the hook's key and its hash are Codex's to
compute, so memsearch does not re-implement them: it asks Codex (``hooks/list`` answers each hook's
``key``, ``currentHash`` and ``trustStatus``) and lets Codex write its own config
(``config/batchWrite``), the same record Codex keeps when the user approves a hook in ``/hooks``.

Only hooks whose command runs *our* shim are ever trusted here; every other hook is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from memsearch.errors import CodexAppError, CodexNoAnswerError

__all__ = [
    "CodexApp",
    "CodexAppError",
    "HookStatus",
    "asked",
    "codex_executable",
    "our_hooks",
    "trust_our_hooks",
]

#: Seconds the first answer (``initialize``) may take. It comes in well under one on an idle
#: laptop, but waits for the app-server's start-up, which can take tens of seconds on a busy
#: machine; install and doctor are one-off commands, so waiting longer costs little and a spurious
#: "no answer" costs a user a failed install.
START_TIMEOUT = 60.0
#: Seconds a later request may take: the server is up and answers at once (0.00 s for
#: ``hooks/list`` here). Once, in a suite run with both cores busy, ``hooks/list`` got no answer
#: within 60 s after ``initialize`` had been answered; a server that stays silent that long is
#: taken for stuck, and :func:`asked` asks a fresh one once more.
ANSWER_TIMEOUT = 30.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class HookStatus:
    """One hook as Codex sees it (``hooks/list``)."""

    key: str
    event: str
    command: str
    current_hash: str
    trust: str  # "trusted" | "untrusted" | "modified" | "managed"
    enabled: bool

    @property
    def runs(self) -> bool:
        """Whether Codex runs this hook (enabled, and trusted or managed by an administrator)."""
        return self.enabled and self.trust in ("trusted", "managed")


def codex_executable(env: Mapping[str, str]) -> str | None:
    """The ``codex`` on the given environment's PATH, or None."""
    return shutil.which("codex", path=env.get("PATH"))


class CodexApp:
    """A running ``codex app-server``; use as a context manager (it is stopped on exit)."""

    def __init__(self, codex: str, env: Mapping[str, str], cwd: Path) -> None:
        try:
            self._proc = subprocess.Popen(
                [codex, "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
                text=True,
            )
            self._pending = b""  # what was read from its stdout and not yet taken as messages
        except OSError as exc:
            raise CodexAppError(f"could not start `{codex} app-server`: {exc.strerror or exc}") from None
        self._ids = iter(range(1, 1 << 30))
        self.request(
            "initialize", {"clientInfo": {"name": "memsearch", "version": _version()}}, timeout=START_TIMEOUT
        )
        self._send({"method": "initialized"})

    def __enter__(self) -> CodexApp:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except OSError as exc:
            raise CodexAppError(f"codex app-server stopped: {exc.strerror or exc}") from None

    def request(self, method: str, params: Mapping[str, Any], *, timeout: float = ANSWER_TIMEOUT) -> Any:
        """Send one request and return its ``result``. Notifications in between are skipped; a
        request of the server's own (an ``id`` and a ``method``) is answered "not handled" at once,
        so the server never waits on us for what memsearch does not do."""
        number = next(self._ids)
        self._send({"id": number, "method": method, "params": dict(params)})
        for message in self._messages(time.monotonic() + timeout):
            if "method" in message and "id" in message:
                refusal = {"code": -32601, "message": f"memsearch does not handle {message['method']}"}
                self._send({"id": message["id"], "error": refusal})
                continue
            if message.get("id") != number:
                continue
            if "error" in message:
                detail = message["error"].get("message") if isinstance(message["error"], dict) else None
                raise CodexAppError(f"codex app-server refused {method}: {detail or message['error']}")
            return message.get("result")
        raise CodexNoAnswerError(f"codex app-server gave no answer to {method} within {timeout:g} s")

    def _messages(self, deadline: float) -> Iterator[dict[str, Any]]:
        """The server's messages until ``deadline``. Read from the pipe's descriptor into our own
        buffer: a buffered ``readline`` would take two messages written together (a notification
        and the answer) into the file object's buffer, where ``select`` does not see the second,
        and the answer would wait there until the deadline."""
        out = self._proc.stdout
        assert out is not None
        while True:
            while b"\n" in self._pending:
                line, _, self._pending = self._pending.partition(b"\n")
                with contextlib.suppress(ValueError):
                    message = json.loads(line)
                    if isinstance(message, dict):
                        yield message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return
            data = os.read(out.fileno(), 65536)
            if not data:
                raise CodexAppError("codex app-server exited before answering")
            self._pending += data

    def hooks(self, cwd: Path) -> list[HookStatus]:
        """Every hook Codex would consider for a session in ``cwd``."""
        result = self.request("hooks/list", {"cwds": [str(cwd)]})
        found = []
        for entry in (result or {}).get("data") or []:
            for hook in entry.get("hooks") or []:
                found.append(
                    HookStatus(
                        key=str(hook.get("key", "")),
                        event=_pascal(str(hook.get("eventName", ""))),
                        command=str(hook.get("command") or ""),
                        current_hash=str(hook.get("currentHash") or ""),
                        trust=str(hook.get("trustStatus", "")),
                        enabled=hook.get("enabled") is not False,
                    )
                )
        return found

    def trust(self, hooks: Sequence[HookStatus]) -> None:
        """Record trust for ``hooks`` in the user's config.toml, written by Codex itself."""
        state = {hook.key: {"trusted_hash": hook.current_hash} for hook in hooks}
        edit = {"keyPath": "hooks.state", "value": state, "mergeStrategy": "upsert"}
        self.request("config/batchWrite", {"edits": [edit]})


def _pascal(name: str) -> str:
    """``sessionStart`` (the app-server's spelling) as ``SessionStart`` (hooks.json's)."""
    return name[:1].upper() + name[1:]


def _version() -> str:
    from memsearch.version import package_version

    return package_version()


def our_hooks(hooks: Sequence[HookStatus], markers: Sequence[str]) -> list[HookStatus]:
    """The hooks whose command contains one of ``markers`` (our shim's path)."""
    return [hook for hook in hooks if any(marker in hook.command for marker in markers)]


def asked(codex: str, env: Mapping[str, str], cwd: Path, work: Callable[[CodexApp], _T]) -> _T:
    """``work`` done with a running app-server; when that server stops answering, once more with a
    fresh one (every request here is a read or a write Codex applies whole, so repeating is safe)."""
    try:
        with CodexApp(codex, env, cwd) as app:
            return work(app)
    except CodexNoAnswerError:
        with CodexApp(codex, env, cwd) as app:
            return work(app)


def trust_our_hooks(
    codex: str, env: Mapping[str, str], cwd: Path, markers: Sequence[str]
) -> list[HookStatus]:
    """Trust the memsearch hooks Codex sees (and only those); returns them as Codex then sees them."""

    def trusted(app: CodexApp) -> list[HookStatus]:
        ours = our_hooks(app.hooks(cwd), markers)
        pending = [hook for hook in ours if hook.trust in ("untrusted", "modified")]
        if pending:
            app.trust(pending)
            ours = our_hooks(app.hooks(cwd), markers)
        return ours

    return asked(codex, env, cwd, trusted)
