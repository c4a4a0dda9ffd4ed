"""Compaction: summarise indexed chunks with an LLM into the day's memory file; transcript summaries.

This module owns what ``memsearch compact`` and ``memsearch summarize`` do, apart from the LLM
call itself (``memsearch.llm``) and the prompt texts (``memsearch.prompts``):

- choosing the chunks: all of them or one source (a file, or every file under a folder), put in
  time order (the date in the file name, else the file's modification date; then path and line)
  and cut to a token budget from the oldest end, so the newest memory always reaches the LLM;
- filling the template: only the literal ``{chunks}`` is replaced, so any other braces (JSON
  examples, ``{{``) reach the LLM as written;
- writing the result: one ``## Memory Compact`` section appended to ``<base>/memory/YYYY-MM-DD.md``
  under an exclusive file lock, with a ``# YYYY-MM-DD`` title only when the file is new, and then
  indexed at once. An empty answer writes nothing;
- ``summarize``: a plugin's configured named provider turns one transcript turn into bullet notes.
"""

from __future__ import annotations

import datetime as dt
import inspect
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import ConfigValueError, MemSearchError, NativeSummarizationError
from memsearch.files import exclusive
from memsearch.llm import LLMSettings, summarize_text
from memsearch.prompts import load_prompt

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig
    from memsearch.engine.interface import ChunkSource

__all__ = [
    "CHUNK_SEPARATOR",
    "DEFAULT_TOKEN_BUDGET",
    "PLACEHOLDER",
    "SECTION_HEADING",
    "ChunkSelection",
    "CompactResult",
    "NativeSummarizationError",
    "append_section",
    "check_budget",
    "check_template",
    "compact_chunks",
    "compact_memory",
    "compact_template",
    "daily_file",
    "estimate_tokens",
    "normalize_source",
    "output_base",
    "render_prompt",
    "select_chunks",
    "summarize_text",
    "summarize_transcript",
    "transcript_prompt",
]

PLACEHOLDER = "{chunks}"
CHUNK_SEPARATOR = "\n\n---\n\n"
SECTION_HEADING = "## Memory Compact"
#: Tokens of chunk text sent to the LLM by default. Every supported default model reads far more
#: (128k and up); this keeps a compact of a large memory affordable and quick, and still holds
#: about 150 chunks of the default 1,500-character size.
DEFAULT_TOKEN_BUDGET = 60_000

_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")
# Scripts whose characters cost about one token each (Han, kana, Hangul, fullwidth forms); the rest
# of the text averages about four characters per token in the tokenizers of the supported models.
_DENSE_CHARS = re.compile(
    r"[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


# --- choosing the chunks --------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of ``text``'s token count: CJK characters 1 each, the rest 4 per token.

    Why not chars / 4 throughout: Chinese, Japanese and Korean take about a token per character, so
    a plain character count would let a CJK memory overshoot its budget four times over.
    """
    dense = len(_DENSE_CHARS.findall(text))
    return dense + -(-(len(text) - dense) // 4)


def _source_date(source: str) -> str:
    """The date a source belongs to: ``YYYY-MM-DD`` from its file name, else its modification date."""
    match = _DATE_IN_NAME.search(Path(source).name)
    if match:
        return match.group(1)
    try:
        return dt.date.fromtimestamp(Path(source).stat().st_mtime).isoformat()
    except (OSError, ValueError, OverflowError):
        return ""  # not a file on this machine (e.g. a session source): oldest


def _time_order(chunks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Oldest first: by source date, then source path, then position in the file."""
    dates: dict[str, str] = {}

    def key(chunk: Mapping[str, Any]) -> tuple[str, str, int]:
        source = str(chunk.get("source") or "")
        if source not in dates:
            dates[source] = _source_date(source)
        return dates[source], source, int(chunk.get("start_line") or 0)

    return sorted(chunks, key=key)


def _cut_to_budget(text: str, budget: int) -> str:
    """The longest start of ``text`` whose estimate fits ``budget`` tokens."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_tokens(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low]


@dataclass(frozen=True)
class ChunkSelection:
    """The chunk texts that fit the budget (oldest first), and what was left out."""

    texts: list[str]
    total: int
    dropped: int
    tokens: int
    #: Whether the newest chunk alone exceeded the budget and was cut.
    truncated: bool = False

    @property
    def used(self) -> int:
        return self.total - self.dropped

    def joined(self) -> str:
        return CHUNK_SEPARATOR.join(self.texts)


def check_budget(token_budget: int) -> int:
    """``token_budget`` if it is at least 1, else :class:`ConfigValueError`."""
    if token_budget < 1:
        raise ConfigValueError(
            f"The token budget must be at least 1 (got {token_budget})",
            hint="Pass a positive --token-budget, or leave it out for the default.",
        )
    return token_budget


def select_chunks(
    chunks: Sequence[Mapping[str, Any]], token_budget: int = DEFAULT_TOKEN_BUDGET
) -> ChunkSelection:
    """Put ``chunks`` in time order and keep the newest that fit ``token_budget`` tokens.

    Walks from the newest chunk back and stops at the first that does not fit, so what is sent is
    always a contiguous, most recent stretch of memory. If even the newest chunk is over budget, its
    start is sent alone. Chunks without text are ignored.
    """
    check_budget(token_budget)
    ordered = [c for c in _time_order(chunks) if str(c.get("content") or "").strip()]
    separator = estimate_tokens(CHUNK_SEPARATOR)
    kept: list[str] = []
    used = 0
    for chunk in reversed(ordered):
        text = str(chunk["content"])
        cost = estimate_tokens(text) + (separator if kept else 0)
        if used + cost > token_budget:
            break
        kept.append(text)
        used += cost
    truncated = False
    if not kept and ordered:
        kept = [_cut_to_budget(str(ordered[-1]["content"]), token_budget)]
        used = estimate_tokens(kept[0])
        truncated = True
    kept.reverse()
    return ChunkSelection(kept, len(ordered), len(ordered) - len(kept), used, truncated)


# --- the prompt -----------------------------------------------------------------------------


def render_prompt(template: str, chunks_text: str) -> str:
    """``template`` with every literal ``{chunks}`` replaced by ``chunks_text``; nothing else changes."""
    check_template(template)
    return template.replace(PLACEHOLDER, chunks_text)


def check_template(template: str) -> str:
    """``template`` if it has the ``{chunks}`` placeholder, else :class:`ConfigValueError`."""
    if PLACEHOLDER not in template:
        raise ConfigValueError(
            "prompt_template must include the {chunks} placeholder",
            hint="Put {chunks} where the chunk text should go; other braces are sent as written.",
        )
    return template


def compact_template(cfg: MemSearchConfig, template: str | None = None) -> str:
    """The compact template: ``template`` (``--prompt``), else the file in ``prompts.compact``
    (which ``--prompt-file`` sets), else the deprecated ``compact.prompt_file``, else the built-in."""
    if template is not None:
        return check_template(template)
    path = cfg.prompts.compact or cfg.compact.prompt_file
    return check_template(load_prompt("compact", override_path=path or None))


async def compact_chunks(
    chunks: Sequence[Mapping[str, Any]],
    *,
    llm_provider: str = "openai",
    model: str | None = None,
    prompt_template: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> str:
    """Summarise ``chunks`` (dicts with ``content``, ``source``, ``start_line``) with an LLM.

    Returns the model's text as given ("" for no chunks). The original memsearch's signature, plus
    ``token_budget``.
    """
    template = check_template(prompt_template if prompt_template is not None else load_prompt("compact"))
    if not chunks:
        return ""
    selection = select_chunks(chunks, token_budget)
    settings = LLMSettings(llm_provider, model, base_url, api_key)
    return await settings.complete(_prompt(template, selection))


def _prompt(template: str, selection: ChunkSelection) -> str:
    """The prompt for ``selection``, through the exits' redaction: the chunks come from the store,
    which may hold what memsearch did not redact (an index built before redaction, or by the original)."""
    from memsearch import exits

    pieces = [exits.out(text, "compact", fragment=True) for text in selection.texts]  # stored chunks
    return exits.out(render_prompt(template, CHUNK_SEPARATOR.join(pieces)), "compact")


# --- writing the daily file -----------------------------------------------------------------


def output_base(output_dir: str | os.PathLike[str] | None, paths: Sequence[str] = ()) -> Path:
    """The folder whose ``memory/`` receives the summary: ``output_dir``, else the first indexed path
    (its folder when it is a file), else the current directory."""
    if output_dir:
        return Path(output_dir).expanduser()
    if paths:
        first = Path(paths[0]).expanduser()
        return first.parent if first.is_file() else first
    return Path.cwd()


def daily_file(base: str | os.PathLike[str], day: dt.date) -> Path:
    """``<base>/memory/YYYY-MM-DD.md``."""
    return Path(base) / "memory" / f"{day.isoformat()}.md"


def append_section(path: str | os.PathLike[str], summary: str, day: dt.date) -> Path:
    """Append a ``## Memory Compact`` section holding ``summary`` to ``path`` (created if missing).

    The check for an empty file and the write happen under one exclusive lock, so two writers
    never both add the ``# YYYY-MM-DD`` title or interleave their text. One blank line separates
    the section from what is above it.
    """
    from memsearch import redact

    summary = redact.current().text(summary, "compact")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+b") as fh, exclusive(fh):
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            lead = f"# {day.isoformat()}\n\n"
        else:
            fh.seek(size - 1)
            lead = "\n" if fh.read(1) == b"\n" else "\n\n"
        fh.seek(0, os.SEEK_END)
        fh.write(f"{lead}{SECTION_HEADING}\n\n{summary.strip()}\n".encode())
        fh.flush()
        os.fsync(fh.fileno())
    return target


# --- compact, end to end --------------------------------------------------------------------


@dataclass(frozen=True)
class CompactResult:
    """What a compact did. ``summary`` is "" and ``file`` is ``None`` when nothing was written."""

    summary: str
    file: Path | None
    #: The source filter as applied (normalised), or ``None`` for all chunks.
    source: str | None
    #: Chunks that matched, and how many of them reached the LLM (the rest exceeded the budget).
    chunks_total: int = 0
    chunks_used: int = 0
    token_budget: int = DEFAULT_TOKEN_BUDGET
    #: Chunks embedded when the daily file was indexed.
    indexed_chunks: int = 0
    #: The LLM was asked but answered with nothing (so nothing was written).
    empty_answer: bool = False

    @property
    def chunks_dropped(self) -> int:
        return self.chunks_total - self.chunks_used


def normalize_source(source: str) -> str:
    """A ``--source`` value as stored: a path absolute and resolved, anything else (``session:ID``) as is."""
    expanded = Path(source).expanduser()
    if expanded.is_absolute() or expanded.exists():
        return str(expanded.resolve())
    return source


async def compact_memory(
    memory: ChunkSource,
    *,
    source: str | None = None,
    llm: LLMSettings | None = None,
    prompt_template: str | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    day: dt.date | None = None,
) -> CompactResult:
    """Summarise ``memory``'s chunks (all, or ``source``: a file or every file under a folder) into
    ``<base_dir or CWD>/memory/<day>.md`` and index that file at once.

    ``memory`` is any :class:`~memsearch.engine.interface.ChunkSource`: a ``MemSearch``, or the memory
    service's proxy (which reads the chunks and indexes the file in the service).

    Nothing is written when no chunk matches or the LLM answers with only whitespace; the result
    says which. ``day`` defaults to today's local date.
    """
    # Everything that can be checked without the store or the network is checked first.
    template = check_template(prompt_template if prompt_template is not None else load_prompt("compact"))
    check_budget(token_budget)
    settings = (llm or LLMSettings()).check()
    wanted = normalize_source(source) if source else None
    chunks = memory.query_chunks(wanted)
    selection = select_chunks(chunks, token_budget)
    result = CompactResult("", None, wanted, selection.total, selection.used, token_budget)
    if not selection.texts:
        return result
    summary = (await settings.complete(_prompt(template, selection))).strip()
    if not summary:
        return replace(result, empty_answer=True)
    when = day or dt.date.today()
    path = append_section(daily_file(base_dir or Path.cwd(), when), summary, when)
    try:
        indexed = memory.index_file(path)  # a Memory answers at once, a MemSearch with an awaitable
        if inspect.isawaitable(indexed):
            indexed = await indexed
    except MemSearchError as exc:
        exc.hint = f"The summary was saved to {path}; run `memsearch index` on it later. {exc.hint}".strip()
        raise
    return replace(result, summary=summary, file=path.resolve(), indexed_chunks=indexed)


# --- summarize ------------------------------------------------------------------------------


def transcript_prompt(system_prompt: str, transcript: str) -> str:
    """The prompt sent for one turn: the instructions, then the transcript after a label."""
    return f"{system_prompt}\n\nTranscript:\n{transcript}"


async def summarize_transcript(
    transcript: str, *, plugin: str, agent_name: str | None = None, cfg: MemSearchConfig | None = None
) -> str:
    """Bullet notes on one transcript turn, from the LLM that ``plugins.<plugin>.summarize.provider``
    names (an ``[llm.providers.<name>]`` entry).

    Raises ``ConfigKeyError`` for an unknown plugin (listing the valid ones),
    :class:`NativeSummarizationError` when the provider is empty or ``native``, and
    ``UnknownLLMProviderError`` when the named provider is not configured. Returns "" for a blank
    transcript (without calling the LLM) and the model's stripped text otherwise. The model is the
    plugin's ``summarize.model``, else the provider's ``model``, else the backend default.
    """
    if cfg is None:
        from memsearch.config import resolve_config

        cfg = resolve_config()
    platform = cfg.plugins.platform(plugin)
    name = platform.summarize.provider.strip()
    if name in ("", "native"):
        raise NativeSummarizationError(
            f"Plugin '{plugin}' is configured for native summarization; "
            "no memsearch-managed provider selected."
        )
    settings = LLMSettings.named(cfg, name)
    if platform.summarize.model:
        settings = LLMSettings(
            settings.provider, platform.summarize.model, settings.base_url, settings.api_key
        )
    from memsearch import redact

    # the hooks send a redacted turn already; `memsearch summarize` reads whatever stdin holds
    transcript = redact.current(cfg).text(transcript, "summary")
    if not transcript.strip():
        return ""
    system = load_prompt(
        "summarize", agent_name=agent_name or plugin, override_path=cfg.prompts.summarize or None
    )
    return (await settings.complete(transcript_prompt(system, transcript))).strip()
