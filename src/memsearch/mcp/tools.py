"""The five tools, shaped for progressive disclosure: ``search`` → ``expand`` → ``transcript``,
plus ``remember`` and ``stats``.

Each tool is a plain function over one :class:`MemoryTools` (the scope, the memory, the budget).
Their docstrings are the descriptions a model reads to decide when to call them, so they say that,
not how they work. Memory text in every answer is framed as data (``memsearch.agent.framing``); what a
budget leaves out is named on a line outside the frame, with the call that gets it.

Expected failures raise ``ToolError`` with one line, the way the CLI prints ``Error: ...``; the SDK
turns it (and a schema violation) into an error result, so a bad call never ends the server.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memsearch.agent.framing import DATA_NOTE, frame
from memsearch.engine.journal import DAY_FILE_RE, TRANSCRIPT_FIELDS
from memsearch.mcp.budget import MAX_NOTE_CHARS, MAX_PATH_CHARS, MAX_QUERY_CHARS, MAX_TOP_K, Budget

if TYPE_CHECKING:
    from memsearch.engine.interface import Memory
    from memsearch.mcp.scope import McpScope

__all__ = ["MemoryTools"]

T = TypeVar("T")

_TURN = r"^[A-Za-z0-9._:-]+$"

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")]
TopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="How many hits (default 5).")]
Day = Annotated[
    str | None,
    Field(max_length=40, description="Inclusive day: YYYY-MM-DD, 7d, yesterday, last monday, 昨天."),
]
ChunkHash = Annotated[
    str, Field(pattern=r"^[0-9a-fA-F]{8,64}$", description="A hit's chunk hash, from search.")
]


#: What ``search`` and ``expand`` answer in a project with nothing indexed yet: a result, not an
#: error (nothing went wrong; there is no memory to read).
NO_MEMORY_YET = (
    "No memory yet: nothing of this project is indexed (its memory folder holds no notes). The "
    "remember tool writes one; sessions with a memsearch plugin add their journals as they run."
)


class MemoryTools:
    """The tools of one server. Store operations run on a worker thread, one at a time: the
    memory's calls block (a routed call waits on a socket, an owned one on Milvus Lite), and the
    event loop must keep reading stdin meanwhile."""

    def __init__(self, scope: McpScope, memory: Memory, budget: Budget) -> None:
        self.scope = scope
        self.memory = memory
        self.budget = budget
        self._lock = threading.Lock()
        self._indexed = False

    async def _call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread; a memsearch error becomes its one-line tool error. The
        first call brings the memory folder's index up to date first (as a plugin's session start
        does; unchanged files cost nothing), so journals written while no plugin ran are found."""
        from memsearch.errors import MemSearchError

        def locked() -> T:
            with self._lock:
                if not self._indexed:
                    self._indexed = True
                    if self.scope.memory_dir.is_dir():
                        self.memory.index()
                return fn()

        try:
            return await anyio.to_thread.run_sync(locked)
        except MemSearchError as exc:
            raise ToolError(f"Error: {exc.one_line()}") from None

    async def _read_index(self, fn: Callable[[], T]) -> T | None:
        """:meth:`_call` for a read of the index; None when nothing of this project was ever
        indexed (the store has no collection for it), which ``search`` and ``expand`` answer with
        :data:`NO_MEMORY_YET`, a result: nothing went wrong."""
        from memsearch.errors import CollectionNotFoundError

        def read() -> T | None:
            try:
                return fn()
            except CollectionNotFoundError:
                return None

        return await self._call(read)

    def shown(self, source: str) -> str:
        """A source path as the model sees it: relative to the project when inside it."""
        try:
            return os.path.relpath(source, self.scope.project_dir) if self._inside(source) else source
        except ValueError:
            return source

    def _inside(self, source: str) -> bool:
        from memsearch.engine.project_files import is_inside

        return is_inside(Path(source), self.scope.project_dir, resolve=False)

    # -- tools ------------------------------------------------------------------------------

    async def search(
        self,
        query: Query,
        top_k: TopK = 5,
        source_prefix: Annotated[
            str | None, Field(max_length=MAX_PATH_CHARS, description="Only files under this path.")
        ] = None,
        since: Day = None,
        until: Day = None,
    ) -> str:
        """Search this project's long-term memory (past sessions' journals and notes) by meaning
        and keywords. Use it before answering questions about earlier work, decisions, bugs,
        preferences or anything "we did before". Returns short snippets with a chunk hash each,
        only those that match strongly (relevance 0-1 shown); call expand with a hash to read the
        full section. A time phrase in the query ("last week", "yesterday", "上周") limits the hits
        to those days; since/until set them instead. "No strong match" means memory holds nothing
        on it: answer without memory, do not search again with other words."""
        prefix = self._prefix(source_prefix)
        memory = self.memory
        config = self.scope.config.search
        hits = await self._read_index(
            lambda: memory.search(
                query,
                top_k=top_k,
                source_prefix=prefix,
                since=since,
                until=until,
                recency_half_life=config.recency_half_life or None,
            )
        )
        if hits is None:
            return NO_MEMORY_YET
        if not hits:
            return "No memory matches. Try other words, a wider date range, or no source_prefix."
        strong = [hit for hit in hits if hit["relevance"] >= config.min_relevance]
        if not strong:
            best = max(hit["relevance"] for hit in hits)
            return (
                f"No strong match in memory: the best hit has relevance {best:.2f}, under the floor "
                f"of {config.min_relevance:.2f}. This project's memory holds nothing on it; answer "
                "without memory (other words will not find it)."
            )
        return self._render_hits(strong)

    async def expand(
        self,
        chunk_hash: ChunkHash,
        section: Annotated[
            bool, Field(description="The whole section (default), or only the chunk's own lines.")
        ] = True,
    ) -> str:
        """Read the full markdown section behind a search hit (by its chunk hash). Use it when a
        snippet looks relevant and you need the details. When the section came from an agent
        session, the answer names its transcript and turn for the transcript tool."""
        memory = self.memory
        result = await self._read_index(lambda: memory.expand(chunk_hash, section=section))
        if result is None:
            return NO_MEMORY_YET
        source = self.shown(result.source)
        head = [f"Source: {source} (lines {result.start_line}-{result.end_line})"]
        if result.heading:
            head.append(f"Heading: {' '.join(result.heading.split())}")
        if result.anchor is not None:
            a = result.anchor.to_dict()
            head.append("Anchor: " + ", ".join(f"{k}={v}" for k, v in a.items()))
            where = next((a[f] for f in TRANSCRIPT_FIELDS if a.get(f)), None)
            if where:
                turn = f', turn="{a["turn"]}"' if a.get("turn") else ""
                head.append(f'Conversation: transcript(path="{where}"{turn})')
        text, left = self.budget.clip(result.content, self.budget.result_chars - 600)
        parts = [DATA_NOTE, *head, frame(text, source)]
        if left:
            hint = (
                f'call expand(chunk_hash="{result.chunk_hash}", section=false) for the chunk alone'
                if section
                else "the chunk is longer than this server's result budget (--max-result-chars)"
            )
            parts.append(f"[truncated: {left} more characters; {hint}]")
        return "\n".join(parts)

    async def transcript(
        self,
        path: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_PATH_CHARS,
                description="The conversation file an expand answer names (its transcript).",
            ),
        ],
        turn: Annotated[
            str | None,
            Field(max_length=128, pattern=_TURN, description="The turn id (a prefix is enough)."),
        ] = None,
        context: Annotated[int, Field(ge=0, le=10, description="Turns before and after the turn.")] = 1,
        session: Annotated[
            str | None, Field(max_length=128, description="For a database transcript: its session.")
        ] = None,
    ) -> str:
        """Read the original conversation turn behind a journal entry (the transcript and turn an
        expand answer names). Use it only when the journal's summary is not enough, e.g. to see
        the exact command, error or wording. Only conversations this project's journals point at
        can be read."""
        from memsearch.transcript import find_turn, format_turns, read_transcript, select_turns

        allowed = await self._call(self._allowed_transcripts)
        try:
            resolved = str(Path(path).expanduser().resolve())
        except (OSError, ValueError, RuntimeError):
            resolved = ""
        if resolved not in allowed:
            raise ToolError(
                "Error: not a conversation this project's memory points at; "
                "pass the transcript path an expand answer names"
            )

        def read() -> str:
            result = read_transcript(resolved, session=session)
            turns = select_turns(result.turns, turn, context)
            if not turns:
                return "No conversation turns in that transcript."
            selected = result.turns[find_turn(result.turns, turn)].uuid if turn else None
            return format_turns(turns, selected=selected, max_chars=self.budget.result_chars - 400)

        text = await self._call(read)
        return "\n".join([DATA_NOTE, frame(text, "transcript")])

    async def remember(
        self,
        note: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_NOTE_CHARS,
                description="What to remember: one fact, decision or preference a line.",
            ),
        ],
    ) -> str:
        """Write a note to this project's memory (today's journal), where every later session,
        this agent's or another's, can find it with search. Use it when the user asks you to
        remember something, or for a decision or finding worth keeping beyond this session."""
        from memsearch.engine.expand import REMEMBER_ANCHOR
        from memsearch.engine.journal import JournalEntry, append_entry

        bullets = [line for line in note.splitlines() if line.strip()]
        if not bullets:
            raise ToolError("Error: the note is empty; give the text to remember")
        scope, memory = self.scope, self.memory

        def write() -> tuple[Path, int] | None:
            # the anchor says who wrote the entry (the console's timeline names it), no conversation
            result = append_entry(scope.memory_dir, JournalEntry(bullets=bullets, anchor=REMEMBER_ANCHOR))
            if not result.written:  # nothing left once the private spans were taken out
                return None
            return result.path, memory.index_file(result.path)

        try:
            written = await self._call(write)
        except OSError as exc:
            raise ToolError(f"Error: cannot write the journal: {exc.strerror or exc}") from None
        if written is None:
            return "Nothing remembered: the note is entirely <private>."
        path, _chunks = written
        return f"Remembered in {self.shown(str(path))} (indexed; search finds it now)."

    async def stats(self) -> str:
        """Show which memory this server serves (project, memory folder, collection, store) and
        how many chunks are indexed."""
        from memsearch.engine.journal import journal_files

        memory = self.memory
        count = await self._call(lambda: memory.count())
        scope = self.scope
        days = journal_files(scope.memory_dir)
        lines = [
            f"Project: {scope.project_dir}",
            f"Memory folder: {scope.memory_dir}",
            f"Journals: {len(days)}" + (f" (newest {days[0].name})" if days else ""),
            f"Collection: {scope.collection}",
            f"Store: {scope.config.milvus.uri}",
            f"Indexed chunks: {count}",
        ]
        return "\n".join(lines)

    # -- helpers ----------------------------------------------------------------------------

    def _prefix(self, prefix: str | None) -> str | None:
        """A source prefix as an absolute path (relative ones from the project, not from the
        store owner's working folder)."""
        if not prefix:
            return None
        return str((self.scope.project_dir / Path(prefix).expanduser()).resolve())

    def _allowed_transcripts(self) -> frozenset[str]:
        """The conversations the project's journals name *and* memsearch recorded naming there
        (``memsearch.engine.written``): an anchor a cloned repository shipped opens nothing."""
        from memsearch.engine import written
        from memsearch.maintenance.commands import anchored_transcripts

        named = anchored_transcripts(self.scope.memory_dir, self.scope.files_root)
        return named & written.recorded_transcripts(self.scope.memory_dir)

    def _render_hits(self, hits: list[dict[str, Any]]) -> str:
        parts = [DATA_NOTE]
        used = len(DATA_NOTE)
        shown = 0
        for i, hit in enumerate(hits, 1):
            source = self.shown(hit["source"])
            day = " ".join(str(hit.get(k) or "") for k in ("date", "time")).strip() or _hit_day(hit["source"])
            meta = f"[{i}] {source}:{hit.get('start_line', '?')}-{hit.get('end_line', '?')}"
            meta += f" | {day}" if day else ""
            meta += f" | relevance {hit['relevance']:.2f} | chunk_hash {hit['chunk_hash']}"
            if hit.get("heading"):
                meta += f"\nHeading: {' '.join(str(hit['heading']).split())[:200]}"
            block = f"{meta}\n{frame(self.budget.snippet(hit['content']), source)}"
            if shown and used + len(block) > self.budget.result_chars - 200:
                break
            parts.append(block)
            used += len(block) + 1
            shown += 1
        if shown < len(hits):
            parts.append(f"[{len(hits) - shown} more hits left out by the result budget; ask for fewer]")
        parts.append("Full text of a hit: expand(chunk_hash=...).")
        return "\n".join(parts)


def _hit_day(source: str) -> str:
    """The day of a journal hit (its file name), "" for any other file."""
    name = os.path.basename(source)
    return name[:-3] if DAY_FILE_RE.match(name) else ""
