"""One memory for every process: every way into a Milvus Lite store works while the others do.

Real processes on one store: a program holding ``MemSearch`` (tests/fixtures/one_memory_program.py,
driven over its stdin), ``memsearch search``/``index``/``reset``, an agent hook's capture (the Claude
Code Stop hook with the fake ``claude`` of tests/fixtures/hooks), ``memsearch watch``,
``memsearch serve`` and ``memsearch mcp`` (its stdio protocol spoken line by line, as a host does).
Each pair runs at once on one store and collection; both must succeed, nobody may see a lock
error, and what one writes the other (or, for roles that cannot read, the next search) finds at
once. Whichever process needs the store first owns it and serves the others
(``memsearch.service.owner``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "hooks"))

import hookkit
from hookkit import CLAUDE_SESSION, CLAUDE_SESSION_ID, HookEnv, load_stdin

from memsearch.agent.hooks.events import SYNC_ENV
from memsearch.service.client import ServiceClient
from memsearch.service.paths import service_paths

pytestmark = pytest.mark.model

PROGRAM = Path(__file__).parent / "fixtures" / "one_memory_program.py"
#: What the fake ``claude`` summary of the fixture turn says (the hook's write).
HOOK_QUERY = "Switch totals.py to Decimal with per-line rounding"
SEED = "# Seed\n\nThe lighthouse keeper logs the tide tables every morning.\n"
SEED_QUERY = "lighthouse keeper tide tables"


class Program:
    """A Python program holding one ``MemSearch`` for its whole life, as an agent loop does."""

    def __init__(self, env: dict[str, str], folder: Path, uri: str, collection: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PROGRAM), str(folder), uri, collection],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        assert self.ask("ping") == "pong"

    def ask(self, *words: str) -> object:
        self.send(*words)
        return self.receive()

    def send(self, *words: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(list(words)) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> object:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.stop()
        answer = json.loads(line)
        assert "error" not in answer, answer
        return answer["result"]

    def sources(self, query: str) -> list[str]:
        result = self.ask("search", query)
        assert isinstance(result, list)
        return [Path(str(source)).name for source in result]

    def stop(self) -> str:
        """Ends the program; returns its stderr (empty when all went well)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            self.proc.stdin = None
        _out, err = self.proc.communicate(timeout=60)
        return err


class McpServer:
    """A ``memsearch mcp`` process, as a host runs it for a session: JSON-RPC lines on its stdio."""

    def __init__(self, w: World) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "mcp", "--project", str(w.hk.project), *w.flags()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=w.hk.project,
            env=w.hk.env(),
        )
        self.ids = itertools.count(1)
        me = {"name": "test", "version": "0"}
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": me})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, message: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def send(self, method: str, params: dict[str, object]) -> int:
        number = next(self.ids)
        self.write({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        return number

    def receive(self, number: int) -> dict[str, object]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, self.stop()
            message = json.loads(line)
            if message.get("id") == number:
                assert "error" not in message, message
                return dict(message["result"])

    def request(self, method: str, params: dict[str, object]) -> dict[str, object]:
        return self.receive(self.send(method, params))

    def tool(self, name: str, **arguments: object) -> str:
        """A tool's text; a tool error fails the test."""
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "\n".join(str(c["text"]) for c in result["content"])  # type: ignore[attr-defined]
        assert not result.get("isError"), text
        return text

    def stop(self) -> str:
        """Closes stdin (the host's session ends); returns stderr."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            self.proc.stdin = None
        _out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return err


@dataclass
class World:
    """One store and collection, a project with a memory folder, and the processes on them."""

    hk: HookEnv
    uri: str
    collection: str
    long_lived: list[subprocess.Popen[str]] = field(default_factory=list)
    programs: list[Program | McpServer] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.hk.memory_dir

    def flags(self) -> list[str]:
        return ["--milvus-uri", self.uri, "--collection", self.collection]

    def cli(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "memsearch", *args, *self.flags()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.hk.project,
            env=self.hk.env(),
        )

    def sources(self, query: str) -> list[str]:
        """What a fresh ``memsearch search`` finds (file names)."""
        out = finish(self.cli("search", query, "-j", "-k", "3"))
        return [Path(hit["source"]).name for hit in json.loads(out)]

    def note(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
        return path


def finish(proc: subprocess.Popen[str], timeout: float = 180) -> str:
    """The stdout of a finished process that succeeded without a word on stderr."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0 and err == "", (proc.args, out, err)
    return out


@contextlib.contextmanager
def world(tmp_path: Path) -> Iterator[World]:
    extra = {SYNC_ENV: "1", "MEMSEARCH_SERVICE_AUTOSTART": "0"}
    with hookkit.hook_env(tmp_path / "w", None, extra_env=extra) as hk:
        hk.memory_dir.mkdir(parents=True)
        (hk.memory_dir / "seed.md").write_text(SEED, encoding="utf-8")
        w = World(hk, str(hk.root / "direct" / "milvus.db"), hk.collection("claude-code"))  # its config
        finish(w.cli("index", str(w.folder)))
        try:
            yield w
        finally:
            errors = [p.stop() for p in w.programs]
            for proc in w.long_lived:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=60)
            assert errors == [""] * len(errors), errors


# --- the roles ----------------------------------------------------------------------------------
# Each role may start (long-lived roles), act concurrently with the other role (a write, a read or
# a reset), and then show what it wrote: (query, file name) the other side must find at once.


@dataclass
class Role:
    name: str
    start: Callable[[World], object] = lambda w: None
    #: Starts the role's action; returns a function that waits for it and returns (query, file) of
    #: what it wrote, or None (a read, a reset).
    act: Callable[[World, object], Callable[[], tuple[str, str] | None]] = lambda w, s: lambda: None
    #: For roles that read: the file names a query finds through this role.
    read: Callable[[World, object, str], list[str]] | None = None


def _program_start(w: World) -> Program:
    program = Program(w.hk.env(), w.folder, w.uri, w.collection, w.hk.project)
    w.programs.append(program)
    return program


def _program_act(w: World, program: object) -> Callable[[], tuple[str, str]]:
    assert isinstance(program, Program)
    w.note("program.md", "The program noted that the heron nests by the weir.")
    program.send("index")

    def done() -> tuple[str, str]:
        program.receive()
        return "heron nests by the weir", "program.md"

    return done


def _program_read(w: World, program: object, query: str) -> list[str]:
    assert isinstance(program, Program)
    return program.sources(query)


def _search_act(w: World, _state: object) -> Callable[[], None]:
    proc = w.cli("search", SEED_QUERY, "-j")

    def done() -> None:
        out, err = proc.communicate(timeout=180)
        if proc.returncode == 1 and err.startswith(f"Error: No collection '{w.collection}'"):
            assert len(err.splitlines()) == 1  # a reset ran first: the one clear answer
            return
        assert proc.returncode == 0 and err == "", err
        assert "seed.md" in [Path(hit["source"]).name for hit in json.loads(out)]

    return done


def _index_act(w: World, _state: object) -> Callable[[], tuple[str, str]]:
    w.note("indexed.md", "The CLI indexed a note about the copper kettle in the attic.")
    proc = w.cli("index", str(w.folder))

    def done() -> tuple[str, str]:
        assert finish(proc).startswith("Indexed ")
        return "copper kettle in the attic", "indexed.md"

    return done


def _reset_act(w: World, _state: object) -> Callable[[], None]:
    proc = w.cli("reset", "--yes")

    def done() -> None:
        assert finish(proc) == "Dropped collection.\n"

    return done


def _hook_act(w: World, _state: object) -> Callable[[], tuple[str, str]]:
    transcript = w.hk.root / "claude-projects" / f"{CLAUDE_SESSION_ID}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CLAUDE_SESSION, transcript)
    stdin = load_stdin("claude-stop.json", TRANSCRIPT=str(transcript), CWD=str(w.hk.project))
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "hook", "claude-code", "stop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=w.hk.project,
        env=w.hk.env(),
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None

    def done() -> tuple[str, str]:
        finish(proc)
        journals = sorted(p.name for p in w.folder.glob("20*.md"))
        assert len(journals) == 1, journals
        return HOOK_QUERY, journals[0]

    return done


def _watch_start(w: World) -> subprocess.Popen[str]:
    log = w.hk.root / "watch.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "watch", str(w.folder), "--debounce-ms", "100", *w.flags()],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=w.hk.project,
            env=w.hk.env(),
        )
    w.long_lived.append(proc)
    wait_for_line(log, "Watching 1 path", proc)
    return proc


def _watch_act(w: World, proc: object) -> Callable[[], tuple[str, str]]:
    assert isinstance(proc, subprocess.Popen)
    log, path = w.hk.root / "watch.log", w.folder / "watched.md"
    # A second act (after a reset) writes the same file again: wait for a line of its own, not the
    # first act's, or the search below may run before the watcher indexed the file anew.
    seen = log.read_text().count(f"from {path}")
    w.note("watched.md", "The watcher saw a note about the violin case under the stairs.")

    def done() -> tuple[str, str]:
        wait_for_line(log, f"from {path}", proc, count=seen + 1)
        return "violin case under the stairs", "watched.md"

    return done


def _serve_start(w: World) -> subprocess.Popen[str]:
    log = w.hk.root / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "serve", *w.flags()],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=w.hk.env(),
        )
    w.long_lived.append(proc)
    client = ServiceClient(service_paths(w.uri, w.hk.home / ".memsearch"))
    deadline = time.monotonic() + 120
    while "standing by" not in log.read_text():  # another owner came first: it waits its turn
        with contextlib.suppress(Exception):
            if client.ping().get("pid") == proc.pid:
                break
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc


def _mcp_start(w: World) -> McpServer:
    server = McpServer(w)
    w.programs.append(server)
    return server


def _mcp_act(w: World, server: object) -> Callable[[], tuple[str, str]]:
    assert isinstance(server, McpServer)
    number = server.send(
        "tools/call", {"name": "remember", "arguments": {"note": "The MCP client noted the otter slide."}}
    )

    def done() -> tuple[str, str]:
        result = server.receive(number)
        assert not result.get("isError"), result
        journals = sorted(p.name for p in w.folder.glob("20*.md"))
        assert len(journals) == 1, journals
        return "otter slide", journals[0]

    return done


def _mcp_read(w: World, server: object, query: str) -> list[str]:
    assert isinstance(server, McpServer)
    text = server.tool("search", query=query, top_k=3)
    return [Path(found).name for found in re.findall(r"^\[\d+\] (\S+?):\d+-\d+", text, re.M)]


def wait_for_line(
    log: Path, text: str, proc: subprocess.Popen[str], timeout: float = 120, count: int = 1
) -> None:
    """Until ``text`` is in the log ``count`` times."""
    deadline = time.monotonic() + timeout
    while log.read_text().count(text) < count:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


ROLES = {
    role.name: role
    for role in [
        Role("program", start=_program_start, act=_program_act, read=_program_read),
        Role("search", act=_search_act),
        Role("index", act=_index_act),
        Role("reset", act=_reset_act),
        Role("hook", act=_hook_act),
        Role("watch", start=_watch_start, act=_watch_act),
        Role("serve", start=_serve_start),
        Role("mcp", start=_mcp_start, act=_mcp_act, read=_mcp_read),
    ]
}
PAIRS = list(itertools.combinations(ROLES, 2))


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_every_pair_of_ways_in_works_at_once_on_one_store(tmp_path: Path, first: str, second: str) -> None:
    with world(tmp_path) as w:
        roles = [ROLES[first], ROLES[second]]
        states = [role.start(w) for role in roles]
        waits = [role.act(w, state) for role, state in zip(roles, states, strict=True)]  # both at once
        written = [wait() for wait in waits]
        if "reset" in (first, second):  # after a reset through one, the other's next write works
            other = roles[1] if first == "reset" else roles[0]
            state = states[1] if first == "reset" else states[0]
            written = [other.act(w, state)()]
            if other.name in ("search", "serve", "hook"):  # they write nothing (a turn is captured once)
                finish(w.cli("index", str(w.folder)))
                written.append((SEED_QUERY, "seed.md"))
        for writer, wrote in zip(roles, written, strict=False):
            if wrote is None:
                continue
            query, name = wrote
            readers = [r for r in roles if r is not writer and r.read is not None]
            for reader in readers:  # a reader that is still running sees it within a second
                seconds = seen_after(reader, states[roles.index(reader)], w, query, name)
                assert seconds <= 1.0, (reader.name, name, seconds)
            assert name in w.sources(query), (writer.name, name)  # and so does the next search
        assert_no_lock_error(w)


def seen_after(reader: Role, state: object, w: World, query: str, name: str, limit: float = 5.0) -> float:
    """Seconds until ``reader`` finds ``name`` for ``query`` (asked again every 50 ms)."""
    assert reader.read is not None
    started = time.monotonic()
    while name not in reader.read(w, state, query):
        waited = time.monotonic() - started
        if waited > limit:
            return waited
        time.sleep(0.05)
    return time.monotonic() - started


def assert_no_lock_error(w: World) -> None:
    for name in ("watch.log", "serve.log"):
        log = w.hk.root / name
        text = log.read_text() if log.exists() else ""
        assert "in use by" not in text and "Traceback" not in text and "Error" not in text, text


# --- a program keeps its memory, and the README's example works next to the CLI -------------------


WATCHING_PROGRAM = """\
import sys
from memsearch import MemSearch

folder, uri, collection = sys.argv[1:4]
with MemSearch([folder], milvus_uri=uri, collection=collection) as ms:
    watch = ms.watch(on_event=lambda kind, summary, path: print(summary, flush=True), debounce_ms=100)
    print("watching with", type(watch).__name__, flush=True)
    sys.stdin.read()
    watch.stop()
"""


def next_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The program's next stdout line, within ``timeout`` seconds."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), f"no line within {timeout} s"
    return proc.stdout.readline().rstrip("\n")


def test_a_programs_watch_runs_at_the_owner_and_here_once_the_owner_goes(tmp_path: Path) -> None:
    """``MemSearch.watch`` while ``serve`` owns the store: the watch runs in the service, with the
    program's callbacks; when the service stops, the program takes the store over and watches it."""
    with world(tmp_path) as w:
        serve = _serve_start(w)
        program = subprocess.Popen(
            [sys.executable, "-c", WATCHING_PROGRAM, str(w.folder), w.uri, w.collection],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=w.hk.env(),
            cwd=w.hk.project,
        )
        try:
            assert next_line(program, 120) == "watching with OwnerWatch"
            first = w.note("at-owner.md", "The owner indexed a note about the lantern on the jetty.")
            assert next_line(program) == f"Indexed 1 chunk from {first}"
            assert "at-owner.md" in w.sources("lantern on the jetty")
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=60) == 0
            client = ServiceClient(service_paths(w.uri, w.hk.home / ".memsearch"))
            deadline = time.monotonic() + 30
            while True:  # the program owns the store now
                with contextlib.suppress(Exception):
                    if client.ping().get("pid") == program.pid:
                        break
                assert time.monotonic() < deadline
                time.sleep(0.1)
            second = w.note("here.md", "The program itself indexed a note about the otter in the reeds.")
            assert next_line(program) == f"Indexed 1 chunk from {second}"
            assert "here.md" in w.sources("otter in the reeds")
        finally:
            _out, err = program.communicate(timeout=60)
        assert program.returncode == 0 and err == "", err


def test_a_program_keeps_its_memory_while_20_searches_and_5_index_runs_come_and_go(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        program = _program_start(w)
        started = time.monotonic()
        searches = 0
        for round_ in range(5):
            w.note(f"round{round_}.md", f"Round {round_} moved the brass compass number {round_}.")
            procs = [w.cli("index", str(w.folder))] + [w.cli("search", SEED_QUERY, "-j") for _ in range(4)]
            for proc in procs:
                finish(proc)
            searches += 4
            assert program.sources(f"brass compass number {round_}")[0] == f"round{round_}.md"
            assert "seed.md" in program.sources(SEED_QUERY)
        assert searches == 20
        while time.monotonic() - started < 60:  # the program goes on using its memory for a minute
            assert program.sources(SEED_QUERY)[0] == "seed.md"
            time.sleep(1.0)
        assert program.ask("count") == 6  # seed + five rounds, nothing twice
        # It owned the store the whole time: every CLI process above was its client.
        info = ServiceClient(service_paths(w.uri, w.hk.home / ".memsearch")).ping()
        assert info["pid"] == program.proc.pid and info.get("owner") == "program"


README = Path(__file__).resolve().parents[1] / "README.md"


def readme_python_example() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_readme_example_runs_verbatim_right_after_a_cli_search(tmp_path: Path) -> None:
    """The service a CLI search starts (autostart on, as users have it) owns the default store;
    the README's program is its client, and the next search sees what the program indexed."""
    work = tmp_path / "work"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "memory", work / "memory")
    env = {**os.environ, "MEMSEARCH_SERVICE_AUTOSTART": "1", "MEMSEARCH_SERVICE_IDLE_TIMEOUT": "30"}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=work, timeout=180
    )
    first = run("-m", "memsearch", "index", "./memory")
    assert first.returncode == 0, first.stderr
    search = run("-m", "memsearch", "search", "database connection timeout", "-j")
    assert search.returncode == 0, search.stderr
    service = ServiceClient(service_paths(str(Path.home() / ".memsearch" / "milvus.db")))
    owner = service.ping()
    assert owner.get("on_demand") is True
    (work / "memory" / "heron.md").write_text("# Heron\n\nWhy did checkout time out? The heron knew.\n")
    example = run("-c", readme_python_example())
    assert example.returncode == 0 and example.stderr == "", example.stderr
    lines = example.stdout.splitlines()
    assert len(lines) == 3 and any("heron.md" in line for line in lines), lines
    assert service.ping()["pid"] == owner["pid"]  # the program went through the service
    os.kill(int(owner["pid"]), signal.SIGTERM)
