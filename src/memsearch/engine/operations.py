"""The one table of a memory's operations: name -> arguments (types, defaults, checks) and wire form.

Why one table: a memory's operations are offered three times — as the synchronous
:class:`memsearch.engine.interface.Memory` (the CLI, the hooks, the MCP tools), as the awaitable
``memsearch.MemSearch`` (the original library API), and as requests to the store's owner over its
socket (``memsearch.service``). Each of them reads this table: the public methods check their
arguments here once (:meth:`Operation.bind`), the owner's client turns them into a request here
(:meth:`Operation.ask`), and the service checks a request against the same rows
(``protocol.parse_request``) and runs it with the row's ``here`` method. Adding an operation is one
row here and the method that does the work in ``MemSearch`` (``tests/test_operations.py`` checks
that every face's signature matches its row).

Standard library only: the service client and the CLI's start-up import it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidArgumentError

if TYPE_CHECKING:
    from memsearch.service.client import ServiceClient

__all__ = ["MAX_CONTEXT_LINES", "MAX_QUERY_CHARS", "MAX_TOP_K", "OPERATIONS", "Operation", "Param"]

#: The most results one search may ask for: a huge ``top_k`` costs the store gigabytes.
MAX_TOP_K = 1000
#: The longest search query, in characters (a prompt the hooks search with is far shorter).
MAX_QUERY_CHARS = 100_000
#: The most context lines ``expand`` may ask for.
MAX_CONTEXT_LINES = 100_000
#: The longest recency half-life, in days (a century: no weighting to speak of).
MAX_HALF_LIFE_DAYS = 36_500

#: The default of a required argument.
REQUIRED: Any = object()
_NONE = type(None)


def _between(low: float, high: float, hint: str = "") -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise InvalidArgumentError(
                f"{name} must be between {low:g} and {high:g} (got {value})",
                hint=hint or f"give {name} in that range",
            )

    return check


def candidate_depth(value: int) -> int:
    """``MemSearch``'s ``search_candidates`` (``search.candidates``), checked where it enters."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K:
        raise InvalidArgumentError(
            f"search_candidates must be a whole number from 1 to {MAX_TOP_K} (got {value!r})",
            hint="set search.candidates in that range (hits each leg fetches before fusion)",
        )
    return value


def _query_length(name: str, value: str) -> None:
    if len(value) > MAX_QUERY_CHARS:
        raise InvalidArgumentError(
            f"the query is {len(value):,} characters; the memory service accepts at most {MAX_QUERY_CHARS:,}",
            hint="search with a shorter query",
        )


@dataclasses.dataclass(frozen=True)
class Param:
    """One argument: its name, the types a caller may pass, its default, a value check, and the
    types it crosses the socket as (``wire``; ``None``: this process's own, never sent)."""

    name: str
    types: tuple[type, ...]
    default: Any = REQUIRED
    check: Callable[[str, Any], None] | None = None
    wire: tuple[type, ...] | str | None = "same"

    @property
    def wire_types(self) -> tuple[type, ...] | None:
        return self.types if self.wire == "same" else self.wire  # type: ignore[return-value]

    def accept(self, value: Any, types: tuple[type, ...], op: str) -> None:
        """Refuse a wrong type (a bool is not an int here), then a value the check refuses."""
        self.accept_type(value, types, op)
        if self.check is not None:
            self.check(self.name, value)

    def accept_type(self, value: Any, types: tuple[type, ...], op: str) -> None:
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise InvalidArgumentError(
                f"argument {self.name!r} of {op!r} has the wrong type ({type(value).__name__})",
                hint="expected " + " or ".join("None" if t is _NONE else t.__name__ for t in types),
            )


def _absolute(value: Any) -> Any:
    """A caller-relative path made absolute in the caller's working directory, before it is sent."""
    return str(Path(value).expanduser().resolve()) if value else value


def _search_outbound(args: dict[str, Any]) -> dict[str, Any]:
    """A search's arguments as the service takes them. The days are the caller's: relative forms
    and phrases resolve against its local date (its ``TZ``), and a date or datetime crosses the
    socket as an ISO day. Only what changes the answer is sent, so a plain search is the same
    request as before these arguments existed (a service of an older install still answers it)."""
    from memsearch.engine.timeframe import local_today, parse_day, resolve_query

    query, since, until, today = args["query"], args["since"], args["until"], args["today"]
    wire: dict[str, Any] = {
        "query": query,
        "top_k": args["top_k"],
        "source_prefix": _absolute(args["source_prefix"]) or None,
    }
    day = parse_day(today) if today is not None else local_today()
    if since is not None or until is not None:
        if since is not None:
            wire["since"] = parse_day(since, day).isoformat()
        if until is not None:
            wire["until"] = parse_day(until, day, end=True).isoformat()
        wire["today"] = day.isoformat()
    elif resolve_query(query, day)[1] is not None:  # the query holds a phrase
        wire["time_phrases"] = args["time_phrases"]
        wire["today"] = day.isoformat()
    if args["recency_half_life"]:
        wire["recency_half_life"] = args["recency_half_life"]
        wire["today"] = day.isoformat()
    if args["min_relevance"]:
        wire["min_relevance"] = args["min_relevance"]
    return wire


def _report(data: Any) -> Any:
    from memsearch.engine.indexer import IndexReport

    return IndexReport.from_dict(data)


def _expansion(data: Any) -> Any:
    from memsearch.engine.expand import Anchor, Expansion

    fields = dict(data)
    anchor = fields.pop("anchor", None)
    return Expansion(**fields, anchor=Anchor(**anchor) if anchor else None)


def _as_dict(value: Any) -> Any:
    return dataclasses.asdict(value)


def _counts(data: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in dict(data).items()}


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation of a memory.

    ``name`` is the method of ``Memory`` and ``MemSearch``; ``wire`` the request's ``op`` (the
    service's older names where they differ); ``here`` the ``MemSearch`` method that does it in the
    process that owns the store; ``embeds`` says ``here`` is a coroutine (it may embed, so
    ``MemSearch``'s face of it is awaitable); ``read`` that it changes nothing (the client's
    patience with a busy service); ``hands_over`` that work it did here before the store opened
    (an index embeds ahead, into the embedding cache) goes to an owner that took the store
    meanwhile rather than being lost (``service.owner.perform``). ``outbound`` makes
    caller-relative arguments absolute before they are sent; ``encode``/``decode`` carry the
    result across the socket as JSON.
    """

    name: str
    params: tuple[Param, ...]
    here: str
    wire: str = ""
    embeds: bool = False
    read: bool = False
    hands_over: bool = False
    outbound: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None

    @property
    def op(self) -> str:
        return self.wire or self.name

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments checked (names, types, values) with the defaults filled in: the one
        check of a call, where it enters (the public method). InvalidArgumentError otherwise."""
        bound: dict[str, Any] = {}
        for param in self.params:
            value = args.get(param.name, param.default)
            if value is REQUIRED:
                raise InvalidArgumentError(f"{self.name!r} needs the argument {param.name!r}")
            param.accept(value, param.types, self.name)
            bound[param.name] = value
        return bound

    def check_request(self, args: Mapping[str, Any]) -> None:
        """A request's arguments as the service receives them (outside data): known names, of
        their wire types, the required ones there. InvalidArgumentError otherwise."""
        params = self.wire_params()
        for name, value in args.items():
            param = params.get(name)
            if param is None:
                raise InvalidArgumentError(f"unknown argument {name!r} for {self.op!r}")
            param.accept_type(value, param.wire_types or (), self.op)
        for name, param in params.items():
            if param.default is REQUIRED and name not in args:
                raise InvalidArgumentError(f"{self.op!r} needs the argument {name!r}")

    def check_values(self, args: Mapping[str, Any]) -> None:
        """The value checks of :meth:`bind` (ranges, sizes) on a request's arguments."""
        for name, param in self.wire_params().items():
            if param.check is not None and name in args:
                param.check(name, args[name])

    def wire_params(self) -> dict[str, Param]:
        return {p.name: p for p in self.params if p.wire_types is not None}

    def ask(self, client: ServiceClient, settings: dict[str, Any], args: dict[str, Any]) -> Any:
        """Run it at the store's owner: one request, its answer decoded."""
        sent = {p.name: args[p.name] for p in self.params if p.wire_types is not None}
        if self.outbound is not None:
            sent = self.outbound(sent)
        answer = client.request(self.op, settings, sent)
        return self.decode(answer) if self.decode is not None else answer


def _path(name: str = "path") -> Param:
    return Param(name, (str, Path), wire=(str,))


_DAY = (str, dt.date, _NONE)

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(
            "search",
            (
                Param("query", (str,), check=_query_length),
                Param("top_k", (int,), 10, _between(1, MAX_TOP_K, f"ask for at most {MAX_TOP_K} results")),
                Param("source_prefix", (str, _NONE), None),
                Param("since", _DAY, None, wire=(str, _NONE)),
                Param("until", _DAY, None, wire=(str, _NONE)),
                Param("time_phrases", (bool,), True),
                Param(
                    "recency_half_life",
                    (int, float, _NONE),
                    None,
                    _between(
                        0, MAX_HALF_LIFE_DAYS, "give a half-life in days, or 0 for no recency weighting"
                    ),
                ),
                Param("today", _DAY, None, wire=(str, _NONE)),
                Param(
                    "min_relevance",
                    (int, float, _NONE),
                    None,
                    _between(0, 1, "give a relevance from 0 to 1, or none for every hit"),
                ),
            ),
            here="_search_here",
            embeds=True,
            read=True,
            outbound=_search_outbound,
        ),
        Operation(
            "index_with_report",
            (Param("force", (bool,), False), Param("progress", (object,), None, wire=None)),
            here="_index_here",
            wire="index",
            embeds=True,
            hands_over=True,
            encode=_as_dict,
            decode=_report,
        ),
        Operation(
            "index_file",
            (_path(),),
            here="_index_file_here",
            embeds=True,
            hands_over=True,
            outbound=lambda a: {"path": _absolute(a["path"])},
            decode=int,
        ),
        Operation(
            "remove_file",
            (_path(),),
            here="_remove_file_here",
            outbound=lambda a: {"path": _absolute(a["path"])},
            decode=_counts,
        ),
        Operation("purge", (), here="_purge_here", decode=_counts),
        Operation(
            "query_chunks", (Param("source", (str, _NONE), None),), here="_query_chunks_here", read=True
        ),
        Operation("get_chunk", (Param("chunk_hash", (str,)),), here="_get_chunk_here", read=True),
        Operation(
            "expand",
            (
                Param("chunk_hash", (str,)),
                Param("section", (bool,), True),
                Param("context_lines", (int, _NONE), None, _between(0, MAX_CONTEXT_LINES)),
            ),
            here="_expand_here",
            read=True,
            encode=_as_dict,
            decode=_expansion,
        ),
        Operation("count", (Param("missing_ok", (bool,), True),), here="_count_here", read=True, decode=int),
        Operation("reset", (), here="_reset_here"),
    )
}

#: Operation by its request name (``index`` is ``index_with_report``'s).
BY_WIRE: dict[str, Operation] = {op.op: op for op in OPERATIONS.values()}
