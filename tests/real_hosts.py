"""The real host CLIs for the real-host tests: pinned npm installs, an isolated world, leak checks.

Why: our plugins only count as working when the hosts themselves run them. The tests install
Claude Code, Codex, OpenCode, OpenClaw and DeepSeek Harness from the npm registry at the versions
below (once, into a cache folder outside the tests' HOME, so reruns cost nothing), give every
session its own HOME / XDG / CODEX_HOME, and tag every process they start with a marker variable,
so that a memsearch process the session left behind is found by its environment (``leftovers``),
not guessed by name.

``MEMSEARCH_HOSTS_CACHE`` moves the cache folder (default ``~/.cache/memsearch-test-hosts``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixtures.privacy import corpus

#: Resolved at import, before the autouse fixture points HOME at a temporary folder.
CACHE = Path(os.environ.get("MEMSEARCH_HOSTS_CACHE") or Path.home() / ".cache" / "memsearch-test-hosts")

#: The node that hosts needing a newer one than the machine's run on (a registry package).
NODE = "node@24.21.0"

#: What a world keeps of the test run's environment: the locale and terminal, and PYTHONPATH, so
#: a run from a git worktree (``PYTHONPATH=<worktree>/src``) has the hosts run that tree's memsearch.
KEPT_ENV = ("LANG", "LC_ALL", "TZ", "TERM", "PYTHONPATH")

#: The environment variable every process of one real-host session carries.
MARKER_ENV = "MEMSEARCH_TEST_SESSION"


@dataclass(frozen=True)
class Host:
    """One host CLI: the npm packages it installs (pinned) and the command it runs."""

    name: str
    packages: tuple[str, ...]
    command: str
    needs_node: str = ""  # an npm "node@x.y.z" package when the machine's node is too old
    npm_flags: tuple[str, ...] = ()  # flags the host's packages need from `npm install`

    @property
    def version(self) -> str:
        return self.packages[0].rsplit("@", 1)[1]


#: DeepSeek Harness 0.1.0-rc.8 as it installs offline: its peer packages named (npm leaves peers
#: out with --legacy-peer-deps, which it needs), its Cordis packages pinned to the versions of its
#: release date (later ones dropped an API it calls: "user patch-layer watching requires the Cordis
#: HMR service"), and pnpm, which `dsh plugin` runs to add a plugin to a profile.
_DSH = "@deepseek-ai/dsh"
DSH_PACKAGES: tuple[str, ...] = (
    f"{_DSH}@0.1.0-rc.8",
    *(
        f"{_DSH}-{name}@0.1.0-rc.8"
        for name in (
            *("invariants", "scope", "fs", "atomic-write", "shell", "bash-local", "sandbox"),
            *("compaction", "workflow", "code-runtime", "timeout", "session-telemetry"),
            *("anonymous-user-id", "output-retention", "session-title-llm", "spill"),
            "subagent-in-process-driver",
        )
    ),
    "@deepseek-ai/cordis@4.0.1",
    "@deepseek-ai/cordis-plugin-hmr@1.0.16",
    "@deepseek-ai/cordis-plugin-loader@1.0.2",
    "@deepseek-ai/cordis-plugin-include@1.0.6",
    "@deepseek-ai/cordis-plugin-timer@1.1.3",
    "@deepseek-ai/cordis-plugin-group@1.0.1",
    "@deepseek-ai/cosmokit@1.8.2",
    "@deepseek-ai/schemastery@3.18.1",
    "pnpm@10.34.9",
)

HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        Host("claude-code", ("@anthropic-ai/claude-code@2.1.197",), "claude"),
        Host("codex", ("@openai/codex@0.171.0",), "codex"),
        Host("opencode", ("opencode-ai@1.18.33",), "opencode"),
        Host("openclaw", ("openclaw@2026.9.6",), "openclaw", needs_node=NODE),
        Host("dsh", DSH_PACKAGES, "dsh", needs_node=NODE, npm_flags=("--legacy-peer-deps",)),
    )
}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _npm_install(packages: tuple[str, ...], prefix: Path, path_env: str, flags: tuple[str, ...] = ()) -> None:
    """``npm install`` into ``prefix`` once; a ``.installed`` file records success."""
    done = prefix / ".installed"
    with _locked(prefix.with_name(prefix.name + ".lock")):
        if done.exists():
            return
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        npm = shutil.which("npm", path=path_env) or "npm"
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *flags,
                *packages,
            ],
            check=True,
            env={**os.environ, "PATH": path_env},
            timeout=900,
        )
        done.write_text(" ".join(packages) + "\n")


def node_bin(package: str = NODE) -> Path:
    """The bin folder of a node installed from the npm registry (installed on first use)."""
    prefix = CACHE / package.replace("@", "-")
    _npm_install((package,), prefix, os.environ.get("PATH", ""))
    return prefix / "node_modules" / "node" / "bin"


def install(name: str) -> Path:
    """Install host ``name`` (if not yet cached); return the folder to put first on PATH."""
    host = HOSTS[name]
    path_env = os.environ.get("PATH", "")
    if host.needs_node:
        path_env = f"{node_bin(host.needs_node)}{os.pathsep}{path_env}"
    prefix = CACHE / f"{name}-{host.version}"
    _npm_install(host.packages, prefix, path_env, host.npm_flags)
    return prefix / "node_modules" / ".bin"


def host_path(name: str) -> str:
    """PATH for a session of host ``name``: the host, its node, memsearch's venv, the system."""
    host = HOSTS[name]
    parts = [str(install(name))]
    if host.needs_node:
        parts.append(str(node_bin(host.needs_node)))
    parts += [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join(parts)


@dataclass
class World:
    """An isolated user for one host session: HOME, XDG folders, a project, an env, a marker."""

    home: Path
    project: Path
    env: dict[str, str]
    marker: str

    def run(
        self,
        argv: list[str],
        *,
        timeout: float = 180,
        stdin: str | None = None,
        cwd: Path | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in this world (non-interactive), capturing its output."""
        proc = subprocess.run(
            argv,
            cwd=cwd or self.project,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc


def make_world(root: Path, host: str, **extra_env: str) -> World:
    """A fresh world under ``root`` for ``host``; ``extra_env`` is added to its environment."""
    home = root / "home"
    project = root / "project"
    for folder in (
        home / ".config",
        home / ".local" / "share",
        home / ".cache",
        home / ".local" / "state",
        project,
    ):
        folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    marker = uuid.uuid4().hex
    keep = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
    env = {
        **keep,
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "CODEX_HOME": str(home / ".codex"),
        "PATH": host_path(host),
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        MARKER_ENV: marker,
        # A memory service started on demand inside the session (a search, a hook) exits this soon
        # after its last use, well within the wait of ``leftovers``.
        "MEMSEARCH_SERVICE_IDLE_TIMEOUT": "3",
        **extra_env,
    }
    return World(home, project, env, marker)


#: The key a Claude Code world sends the fake model API (an interactive first run approves its
#: last 20 characters: tests/test_host_claude_code.py).
CLAUDE_API_KEY = "sk-fake-memsearch-0123456789abcdef"


def claude_world(root: Path, api_url: str, **extra_env: str) -> World:
    """A world whose Claude Code talks to the fake model API at ``api_url`` and nowhere else."""
    return make_world(
        root,
        "claude-code",
        ANTHROPIC_BASE_URL=api_url,
        ANTHROPIC_API_KEY=CLAUDE_API_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        **extra_env,
    )


def opencode_world(root: Path, api_url: str, **extra_env: str) -> World:
    """A world whose OpenCode has one model, ``fake/fake-model`` at the fake model API ``api_url``
    (its settings in ``OPENCODE_CONFIG``, so a project's or the user's opencode.json adds to them)."""
    return make_world(root, "opencode", **opencode_env(root, api_url), **extra_env)


def opencode_env(root: Path, api_url: str) -> dict[str, str]:
    """The variables that give OpenCode the fake model (its provider file written under ``root``)."""
    provider = root / "provider.json"
    provider.write_text(
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "model": "fake/fake-model",
                "autoupdate": False,
                "share": "disabled",
                "provider": {
                    "fake": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Fake",
                        "options": {"baseURL": f"{api_url}/v1", "apiKey": "test-key"},
                        "models": {"fake-model": {"name": "Fake", "tool_call": True}},
                    }
                },
            }
        )
    )
    return {
        "OPENCODE_CONFIG": str(provider),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }


def _environ_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _cmdline_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def marked_processes(marker: str) -> dict[int, str]:
    """Live processes (pid -> command line) that carry this world's marker, zombies excluded."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if needle in _environ_of(pid).split(b"\0"):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                found[pid] = _cmdline_of(pid)
    return found


def leftovers(world: World, wait: float = 20.0) -> dict[int, str]:
    """The world's processes still alive after up to ``wait`` seconds (the answer should be {})."""
    deadline = time.monotonic() + wait
    while True:
        alive = marked_processes(world.marker)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.25)


def wait_for(probe: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``probe`` until it returns something truthy (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def kill_world(world: World) -> None:
    """Clean-up after a test: SIGKILL whatever the world still runs."""
    for pid in marked_processes(world.marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def parrot_summaries(api: Any, ours: Callable[[Any], bool], bullets: str) -> None:
    """Make the summariser (the requests ``ours`` picks) a careless model, ahead of every other
    rule of the fake model API ``api``: it answers ``bullets``, a secret of its own, then every
    line of the transcript it was given (journals keep 20 bullets: the instructions are left out).
    A value that slipped through capture, or one the model wrote, would then land in the journal
    unless memsearch redacts what it writes."""
    from fake_model_api import Answer

    def reply(call: Any) -> Answer:
        transcript = call.everything.rsplit("=== Transcript", 1)[-1]
        given = "\n".join(f"- {line}" for line in transcript.splitlines()[1:] if line.strip())
        return Answer(text=f"{bullets}\n- Pushed with {corpus.S['github-token']}.\n{given}")

    with api._lock:
        api.rules.insert(0, (ours, reply))


def plant_journal(world: World) -> Path:
    """A journal holding secrets, planted on disk before the session (bypassing capture), in the
    original's format: what the session start shows the host's model (:func:`check_secrets_kept`)."""
    memory = world.project / ".memsearch" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    path = memory / "2026-01-05.md"
    path.write_text(corpus.PLANTED_JOURNAL, encoding="utf-8")
    return path


def check_secrets_kept(world: World, calls: list[Any], ours: Callable[[Any], bool], planted: Path) -> None:
    """After a session that had the secrets corpus (tests/fixtures/privacy/corpus.py) in its
    prompt: no secret value in any byte under the project's and the user's ``.memsearch`` (journal,
    Milvus Lite store, embedding cache, manifests, logs), none in a model request memsearch sent
    (``ours``: the summariser's), while the host's own requests did carry the prompt's secrets,
    so the corpus truly was in the session. And the ``planted`` journal (:func:`plant_journal`)
    reached the host's model (its marker is in a request) with none of its secrets, in any request,
    nor in any file memsearch wrote."""
    assert corpus.hits(world.project / ".memsearch", world.home / ".memsearch") == []
    assert any(corpus.PLANTED_MARKER in c.everything for c in calls), "the planted journal was never shown"
    for call in calls:
        assert corpus.planted_in(json.dumps(call.body, ensure_ascii=False)) == set()
    written = [
        path
        for top in (world.project / ".memsearch", world.home / ".memsearch")
        for path in top.rglob("*")
        if path != planted
        and path.is_file()
        and not path.is_symlink()
        and corpus.planted_in(path.read_bytes())
    ]
    assert written == []
    sent = [c for c in calls if ours(c)]
    assert sent, "memsearch sent the model nothing: the summariser never ran"
    assert all("[REDACTED:" in c.everything for c in sent), "the summariser saw no redacted turn"
    for call in sent:
        assert corpus.kinds_in(json.dumps(call.body, ensure_ascii=False)) == set()
    host_saw: set[str] = set()
    for call in calls:
        if not ours(call):
            host_saw |= corpus.kinds_in(json.dumps(call.body, ensure_ascii=False))
    assert corpus.kinds_in(corpus.PROMPT) <= host_saw, "the prompt's secrets never reached the host's model"


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>]")


class Terminal:
    """A host's interactive UI in a pseudo-terminal: type into it, wait for text on its screen."""

    def __init__(
        self, argv: list[str], world: World, cwd: Path | None = None, size: tuple[int, int] = (50, 160)
    ) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the host
            os.chdir(cwd or world.project)
            os.environ.clear()
            os.environ.update(
                {**world.env, "TERM": "xterm-256color", "LINES": str(size[0]), "COLUMNS": str(size[1])}
            )
            os.execvp(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
        self.raw = b""

    @property
    def text(self) -> str:
        """Everything the host printed so far, without terminal escape codes."""
        return _ANSI.sub("", self.raw.decode(errors="replace"))

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.1))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.raw += chunk

    def expect(self, pattern: str, timeout: float = 60.0, since: int = 0) -> re.Match[str]:
        """Wait until ``pattern`` (a regex) shows in the output after offset ``since``."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.text[since:])
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r}; screen tail:\n{self.text[-3000:]}")
            self.pump(0.2)

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def type_line(self, text: str, pause: float = 0.3) -> None:
        """Type ``text`` like a person, then press Enter."""
        self.send(text)
        self.pump(pause)
        self.send("\r")

    def paste_line(self, text: str, timeout: float = 30.0, pause: float = 0.5) -> None:
        """Paste ``text`` as a terminal does (bracketed paste), wait until the host shows it, then
        press Enter ``pause`` seconds later, as a person would.

        Why not ``type_line``: a host that guesses pastes from key timing turns an Enter it reads
        together with the typed text into a newline. Codex 0.171.0's composer takes a quick run of
        characters for a paste and an Enter within ~120 ms of the last character it *handled* as
        a newline in it, so whenever the TUI reads our text late (busy starting up, a loaded
        machine), text and Enter arrive together and the prompt just sits in the composer. A
        bracketed paste is unambiguous, and an Enter sent after the text is on screen is handled
        after it, however late the host reads."""
        raw = self.raw
        if raw.rfind(b"\x1b[?2004h") <= raw.rfind(b"\x1b[?2004l"):
            raise AssertionError("the host has not turned on bracketed paste; use type_line")
        start = len(self.text)
        self.send(f"\x1b[200~{text}\x1b[201~")
        # The screen is redrawn cell by cell, so spaces may be cursor moves (stripped) or wraps.
        self.expect(r"\s*".join(re.escape(c) for c in text if not c.isspace()), timeout, since=start)
        self.pump(pause)
        self.send("\r")

    def wait(self, timeout: float = 30.0) -> int | None:
        """Wait for the host to exit; its exit status, or None if it is still running."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        return None

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def seed_journals(world: World, fact: str) -> None:
    """Four days of journals, seven entries a day, far more than a small session-start budget:
    each entry one bullet, ``fact`` formatted with its ``day`` and ``hour`` (the budget tests of
    the host files: the newest entry must stay, the oldest go)."""
    memory = world.project / ".memsearch" / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    for day in range(1, 5):
        entries = "".join(
            f"### {hour:02d}:00\n- {fact.format(day=day, hour=hour)}\n\n" for hour in range(9, 16)
        )
        (memory / f"2026-11-0{day}.md").write_text(
            f"# 2026-11-0{day}\n\n## Session 09:00\n\n{entries}", encoding="utf-8"
        )
