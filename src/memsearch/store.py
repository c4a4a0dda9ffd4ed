"""The Milvus store: the one place that talks to Milvus (Lite or server).

Owns the collection schema (the original's), hybrid dense + BM25 search fused by RRF, upsert,
delete and paginated scalar queries, filter-expression escaping, and turning every driver failure
into a :mod:`memsearch.errors` class with a hint. Milvus Lite is driven in this process by
:mod:`memsearch.lite`, without pymilvus; pymilvus is imported (inside functions only: it costs
~0.8 s) for Milvus servers and Zilliz Cloud alone.

Where the original falls short and this module does better:

- URIs are classified by a table of schemes; a Lite path is expanded, resolved and must end in
  ``.db`` (pymilvus itself refuses anything else, so a plain directory path is rejected up front
  with a hint instead of a driver error).
- A Lite database held by another process is waited for (``lock_timeout``), then reported with the
  holder's PID and command line (§23.16).
- Filter values are escaped in one helper; ``source_prefix_filter`` matches on path boundaries and
  escapes LIKE wildcards (§23.14).
- ``query``/``indexed_sources``/``hashes_by_source`` page through results (§23.10).
- Over-long ``source``/``heading``/``content`` values are truncated to the field's UTF-8 byte
  limit instead of failing the whole batch (§23.11). Milvus server counts VARCHAR ``max_length``
  in bytes, Milvus Lite in characters; a byte limit satisfies both.
- Empty-collection search is detected with a consistent query, not lagging row-count stats
  (§23.12); ``count()`` uses ``count(*)`` for the same reason.
- Read-only use of a missing collection raises ``CollectionNotFoundError`` (§23.13).
- The ``content`` analyzer segments Chinese (jieba) when the ``jieba`` package is installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from memsearch import errors
from memsearch.uri import SERVER_PREFIXES, StoreLocation, resolve_uri

if TYPE_CHECKING:
    from typing import TypeAlias

    from pymilvus import MilvusClient

    from memsearch.lite import LiteClient

    #: pymilvus' client for servers; for Lite, the in-process client answering the same calls.
    Client: TypeAlias = MilvusClient | LiteClient

logger = logging.getLogger(__name__)

DEFAULT_URI = "~/.memsearch/milvus.db"
DEFAULT_COLLECTION = "memsearch_chunks"

#: The two retrievers: leg -> (vector field, search params, its distance as a score). Milvus Lite
#: reports BM25 negated (smaller = better), a server positive: abs() is the score on both. Cosine
#: similarity is already "higher is better".
LEGS: dict[str, tuple[str, dict[str, Any], Callable[[float], float]]] = {
    "dense": ("embedding", {"metric_type": "COSINE", "params": {}}, float),
    "sparse": ("sparse_vector", {"metric_type": "BM25"}, abs),
}
#: What ``MilvusStore.search`` can ask: both legs fused by RRF, or one leg alone.
SEARCH_MODES = ("hybrid", *LEGS)

#: RRF constant (as the original's ``RRFRanker(60)``). Fused scores are divided by the best score
#: the legs can give together (rank 1 in both lists), so 1.0 means "top of both lists".
RRF_K = 60

#: The fields every search/query result carries, in this order.
_QUERY_FIELDS = ["content", "source", "heading", "chunk_hash", "heading_level", "start_line", "end_line"]

#: VARCHAR limits of the schema, in UTF-8 bytes (see the module docstring for why bytes).
FIELD_MAX_BYTES = {"chunk_hash": 64, "content": 65535, "source": 1024, "heading": 1024}
#: Fields cut to their limit on upsert rather than failing the batch. ``chunk_hash`` is an
#: identity and is never cut.
_TRUNCATED_FIELDS = ("content", "source", "heading")


CONNECT_TIMEOUT = 5.0  # seconds; an unreachable server must fail fast
LOCK_POLL_INTERVAL = 0.2  # seconds between attempts on a locked Lite database
PAGE_SIZE = 1000  # rows per query page (Milvus caps offset+limit at 16384)
IN_BATCH = 256  # values per ``source in [...]`` query
DELETE_BATCH = 1000  # primary keys per delete call
UPSERT_MAX_ROWS = 500
UPSERT_MAX_BYTES = 16 * 1024 * 1024  # stay well under gRPC message limits

_LOCK_FILENAME = "LOCK"  # milvus-lite's advisory flock inside the database directory
_DESCRIPTION_PROPERTY = "memsearch.description"
_COLLECTION_NOT_FOUND = 100  # Milvus error code

#: Characters a filter string literal must escape, and how. Other control characters are refused.
_FILTER_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: LIKE wildcards and its escape character, escaped for the LIKE matcher (before string escaping).
_LIKE_ESCAPES = {"\\": "\\\\", "%": "\\%", "_": "\\_"}

_GENERIC_HINT = (
    "Check the Milvus server's logs; if the index is damaged, `memsearch reset --yes` and "
    "re-indexing rebuild it from the markdown files."
)


# --- filter expressions ---------------------------------------------------------------------


def escape_filter_value(value: str) -> str:
    """Escape ``value`` for use inside a double-quoted Milvus filter string literal.

    Every filter this package builds from user data goes through here, so a source path or chunk
    hash containing ``"`` or ``\\`` can never change the meaning of the expression. Newline, CR
    and tab become their escape sequences; other control characters are refused, as Milvus string
    literals have no portable escape for them (milvus-lite knows only ``\\n``, ``\\r``, ``\\t``).
    """
    value = _utf8_safe(value)
    out = []
    for ch in value:
        escaped = _FILTER_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20 or ch == "\x7f":
            raise errors.StoreError(
                f"Cannot filter on a value containing the control character U+{ord(ch):04X}: {value!r}",
                hint="rename the file so its path has no control characters",
            )
        else:
            out.append(ch)
    return "".join(out)


def _like_escape(value: str) -> str:
    """Make ``value`` match itself literally in a LIKE pattern (then string-escape it).

    Milvus unescapes backslashes twice: once reading the string literal, once in the LIKE
    matcher, so a literal ``_`` is written ``\\\\_`` in the expression. Verified on milvus-lite
    (embedded and server); Milvus server handles these escapes since the 2.5/2.6 fixes for
    milvus-io/milvus#43864, so on older servers a prefix containing ``%`` or ``_`` may not match.
    """
    return escape_filter_value("".join(_LIKE_ESCAPES.get(ch, ch) for ch in value))


def source_prefix_filter(prefix: str) -> str:
    """A filter matching ``source`` equal to ``prefix`` or inside it, on path boundaries.

    ``/notes/docs`` matches ``/notes/docs`` and ``/notes/docs/a.md`` but not ``/notes/docs2/b.md``
    (the original matched any string prefix). A trailing separator is ignored; ``/`` matches every
    absolute path; an empty prefix matches everything. The expression is parenthesised so callers
    can combine it with ``and``.
    """
    separators = list(dict.fromkeys(["/", os.sep]))
    stripped = prefix.rstrip("".join(separators))
    if not prefix:
        return 'source like "%"'
    clauses = [f'source == "{escape_filter_value(stripped)}"'] if stripped else []
    for sep in separators:
        literal = stripped + sep
        # milvus-lite evaluates LIKE with pyarrow, whose fast path for "<literal>%" mishandles an
        # escaped backslash (verified with pyarrow 26); "_%" (at least one more character, which
        # every file under a directory has) takes its general path instead.
        tail = "_%" if "\\" in literal else "%"
        clauses.append(f'source like "{_like_escape(literal)}{tail}"')
    return "(" + " or ".join(clauses) + ")"


def _source_equals(source: str) -> str:
    return f'source == "{escape_filter_value(_stored_value("source", source))}"'


# --- values ---------------------------------------------------------------------------------


def _utf8_safe(text: str) -> str:
    """``text`` with lone surrogates (undecodable file names) replaced by U+FFFD.

    Milvus only carries valid UTF-8; replacing them the same way on write and in filters keeps
    such a file findable instead of failing its batch.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes`` (whole characters)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def _stored_value(field: str, value: str) -> str:
    """The value Milvus will hold for ``field`` after upsert's cleaning and truncation."""
    cleaned = _utf8_safe(value)
    if field in _TRUNCATED_FIELDS:
        cleaned = truncate_utf8(cleaned, FIELD_MAX_BYTES[field])
    return cleaned


def _prepare_rows(chunks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy rows with long text fields truncated and duplicate chunk hashes collapsed (last wins).

    Duplicate primary keys in one upsert are undefined behaviour in Milvus (§23.5).
    """
    rows: dict[Any, dict[str, Any]] = {}
    for chunk in chunks:
        row = dict(chunk)
        for field in _TRUNCATED_FIELDS:
            value = row.get(field)
            if isinstance(value, str):
                stored = _stored_value(field, value)
                if len(stored) < len(value):
                    logger.warning(
                        "Truncated %s of chunk %s from %d to %d characters (Milvus limit %d bytes)",
                        field,
                        row.get("chunk_hash"),
                        len(value),
                        len(stored),
                        FIELD_MAX_BYTES[field],
                    )
                row[field] = stored
        key = row.get("chunk_hash")
        rows.pop(key, None)
        rows[key] = row
    return list(rows.values())


def _row_size(row: dict[str, Any]) -> int:
    text = sum(len(v) * 4 for v in row.values() if isinstance(v, str))
    vector = row.get("embedding")
    return text + (len(vector) * 8 if isinstance(vector, Sequence) else 0) + 256


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Split rows into upsert calls bounded by row count and (estimated) message size."""
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        row_size = _row_size(row)
        if batch and (len(batch) >= UPSERT_MAX_ROWS or size + row_size > UPSERT_MAX_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += row_size
    if batch:
        yield batch


# --- fusion -----------------------------------------------------------------------------------

#: Weight of the favoured leg in :func:`hybrid_weights` (the other leg has 1.0). Any value above
#: ~1.15 makes the favoured leg win every tie and near-tie; on the evaluation sets 1.05-3 gave the
#: same Recall@5 and 1.5 was within 0.01 MRR of the best everywhere (evaluation/README.md).
HYBRID_TILT = 1.5
#: Han, kana and hangul: scripts that general-purpose English embedding models read poorly and that
#: the jieba BM25 analyzer segments.
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def hybrid_weights(query: str) -> tuple[float, float]:
    """(dense, BM25) fusion weights for ``query``: BM25 leads for CJK text, the dense leg otherwise.

    Why: plain RRF lets the weaker leg drag the stronger one down. On the evaluation sets the dense
    leg beats BM25 on English questions, while BM25 with Chinese segmentation beats the (English)
    default model on Chinese by a wide margin; leaning towards the stronger leg made hybrid at
    least as good as either leg alone on every set.
    """
    return (1.0, HYBRID_TILT) if _CJK_RE.search(query) else (HYBRID_TILT, 1.0)


def fuse(
    ranked: dict[str, list[Any]], weights: tuple[float, float] | None, top_k: int
) -> list[dict[str, Any]]:
    """Fuse the legs' raw hits (``{"dense": [...], "sparse": [...]}``, best first) by RRF.

    ``weights`` (dense, BM25) weighs each leg's ``1 / (k + rank)``; ``None`` is plain RRF, as in the
    original. Scores are normalised so rank 1 in every list scores 1.0. Hits are visited heaviest
    leg first, so a tie keeps the heavier leg's order.
    """
    weight = dict(zip(LEGS, weights or (1.0, 1.0), strict=True))
    scores: dict[str, float] = {}
    hits: dict[str, Any] = {}
    for name in sorted(ranked, key=lambda n: -weight[n]):
        for rank, hit in enumerate(ranked[name], 1):
            key = str(hit.get("id") or (hit.get("entity") or {}).get("chunk_hash"))
            scores[key] = scores.get(key, 0.0) + weight[name] / (RRF_K + rank)
            hits.setdefault(key, hit)
    best = sum(weight[name] for name in ranked) / (RRF_K + 1)
    fused = []
    for key in sorted(scores, key=lambda k: -scores[k])[:top_k]:  # stable: ties keep visiting order
        result = MilvusStore._hit_to_result(hits[key], float)
        result["score"] = min(1.0, scores[key] / best)  # rank 1 in both: 1.0, not 1.0000000000000002
        fused.append(result)
    return fused


def _chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --- quieting the driver's own logging ------------------------------------------------------

#: Loggers that print driver-side tracebacks for failures we already turn into typed errors
#: (pymilvus logs every failed RPC with a traceback at ERROR; milvus-lite logs a failed open).
_QUIET_LOGGERS = (
    "pymilvus.decorators",
    "pymilvus.client.grpc_handler",
    "pymilvus.client.connection_manager",
    "pymilvus.client.iterator.query_iterator",
    "milvus_lite.server_manager",
    # "manifest.json failed to load, falling back to ...": a damaged database is reported once, as
    # a StoreDamagedError, or not at all when the fallback worked.
    "milvus_lite.storage.manifest",
)
_quiet_state = threading.local()


class _CaptureFilter(logging.Filter):
    """Drops records logged on this thread inside :func:`_quiet`, keeping their exceptions."""

    def filter(self, record: logging.LogRecord) -> bool:
        captured: list[BaseException] | None = getattr(_quiet_state, "captured", None)
        if captured is None:
            return True
        if record.exc_info and record.exc_info[1] is not None:
            captured.append(record.exc_info[1])
        return False


_CAPTURE_FILTER = _CaptureFilter()


@contextlib.contextmanager
def _quiet() -> Iterator[list[BaseException]]:
    """Silence the driver's log output on this thread; yield the exceptions it logged."""
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).addFilter(_CAPTURE_FILTER)  # idempotent
    previous = getattr(_quiet_state, "captured", None)
    captured: list[BaseException] = []
    _quiet_state.captured = captured
    try:
        yield captured
    finally:
        _quiet_state.captured = previous


def _is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".", 1)[0] in {"pymilvus", "grpc", "milvus_lite"}


def _driver_message(exc: BaseException) -> tuple[Any, str]:
    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError
        with contextlib.suppress(Exception):
            code = code()
        code = getattr(code, "name", code)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if callable(message):
        message = str(exc)
    return code, str(message)


# --- Milvus Lite: locks -------------------------------------------------------------------


def _lock_is_held(db_dir: Path) -> bool:
    """Whether some process holds milvus-lite's flock on ``db_dir`` (POSIX only)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return False
    try:
        fd = os.open(db_dir / _LOCK_FILENAME, os.O_RDWR)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def lock_holders(db_dir: Path) -> list[tuple[int, str]]:
    """Best effort: (pid, command line) of processes with ``db_dir``'s LOCK file open (Linux /proc)."""
    target = os.path.realpath(db_dir / _LOCK_FILENAME)
    proc = Path("/proc")
    holders: list[tuple[int, str]] = []
    if not proc.is_dir():
        return holders
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list(os.scandir(entry / "fd"))
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd.path) != target:
                    continue
            except OSError:
                continue
            holders.append((int(entry.name), _cmdline(entry)))
            break
    return holders


def _cmdline(proc_dir: Path) -> str:
    try:
        raw = (proc_dir / "cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= 120 else text[:117] + "..."


def _describe_holders(db_dir: Path) -> str:
    holders = lock_holders(db_dir)
    if not holders:
        return "another process"
    described = [f"process {pid} ({cmd})" if cmd else f"process {pid}" for pid, cmd in holders]
    return ", ".join(described)


def _locked_hint(db_dir: Path) -> str:
    """What to do about a held database: use the memory service if that is the holder."""
    if any("memsearch" in cmd and (" serve" in cmd or " watch" in cmd) for _, cmd in lock_holders(db_dir)):
        return (
            "That is the memsearch memory service: commands use it by themselves unless "
            "MEMSEARCH_NO_SERVICE is set; unset it, or stop the service first."
        )
    return "Stop it, or run `memsearch serve` so processes share one store."


def _milvus_lite_major() -> int | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("milvus-lite").split(".", 1)[0])
    except (PackageNotFoundError, ValueError):
        return None


def _legacy_file_error(path: Path, major: int) -> errors.StoreConnectionError:
    return errors.StoreConnectionError(
        f"Could not open the Milvus Lite database at {path}: Milvus Lite {major}.x stores a database "
        "as a directory, but this path is a file",
        hint=(
            "If it is a database from Milvus Lite 2.x, move it aside and rebuild the index with "
            "`memsearch index`; otherwise check --milvus-uri, or use a Milvus server or Zilliz Cloud."
        ),
    )


# --- Milvus Lite: damaged databases ---------------------------------------------------------

#: The engine's own verdicts on files it could not read back.
_DAMAGE_ERRORS = frozenset({"ManifestCorruptedError", "WALCorruptedError"})
#: Engine functions that read the database's files (schema, manifest, Parquet segments, vector
#: indexes): a decoding failure raised inside one means a file holds something it never wrote.
_READING_FRAME = re.compile(r"_?(load|read)(_|$)")


def _is_damage(exc: BaseException) -> bool:
    """Whether a Milvus Lite failure comes from unreadable database files (not a full disk, a
    permission problem or a bad request): the engine said so, or a JSON/Parquet/NumPy decoding
    error (not one of the engine's own errors) came out of one of its reading functions."""
    if type(exc).__name__ in _DAMAGE_ERRORS:
        return True
    chain = [exc] + ([exc.__cause__] if exc.__cause__ is not None else [])
    if any(isinstance(e, (OSError, MemoryError)) for e in chain):
        return False
    for e in chain:
        if type(e).__module__.split(".", 1)[0] == "milvus_lite":
            continue  # the engine's own errors are judged by their type (above), not where they arose
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if "milvus_lite" in code.co_filename and _READING_FRAME.match(code.co_name):
                return True
            tb = tb.tb_next
    return False


def _damaged_error(path: Path, cause: BaseException) -> errors.StoreDamagedError:
    _, message = _driver_message(cause)
    if len(message) > 300:
        message = message[:297] + "..."
    return errors.StoreDamagedError(
        f"The Milvus Lite database {path} is damaged: a file in it cannot be read ({message})",
        hint=(
            "The markdown files are the source of truth: run `memsearch reset --yes` (with the same "
            f"--milvus-uri/--collection), or delete {path}, then `memsearch index <paths>` to rebuild it."
        ),
    )


def _generic_open_error(path: Path, cause: BaseException) -> errors.StoreError:
    if _is_damage(cause):
        return _damaged_error(path, cause)
    _, message = _driver_message(cause)
    return errors.StoreConnectionError(
        f"Could not open the Milvus Lite database at {path}: {message}. Possible causes: another "
        "process already has the database open, wrong permissions, or a damaged database",
        hint=(
            "Close other processes using it and verify that the path is writable; preserve the "
            "database (copy it aside) and inspect the logs before attempting any recovery."
        ),
    )


# --- the analyzer ---------------------------------------------------------------------------


#: Analyzer params per explicit analyzer name. ``lowercase`` keeps English matching
#: case-insensitive on Milvus server, whose jieba tokenizer does not lowercase (milvus-lite's does,
#: and ignores the filter). ``None`` = the standard analyzer, as in the original.
ANALYZERS: dict[str, dict[str, Any] | None] = {
    "standard": None,
    "jieba": {"tokenizer": "jieba", "filter": ["lowercase"]},
}
#: Every value the ``analyzer`` argument accepts ("auto" = jieba when installed, else standard).
ANALYZER_CHOICES = ("auto", *ANALYZERS)


def default_analyzer_params() -> dict[str, Any] | None:
    """Analyzer for ``content`` in a new collection: jieba (segments Chinese) when installed."""
    if importlib.util.find_spec("jieba") is None:
        return ANALYZERS["standard"]
    return ANALYZERS["jieba"]


def analyzer_params_for(name: str, *, local: bool) -> dict[str, Any] | None:
    """The analyzer params for ``name`` (``"auto"``, ``"standard"`` or ``"jieba"``).

    Choosing explicitly lets an evaluation compare analyzers on the same machine. Milvus Lite runs
    jieba in this process, so ``"jieba"`` on Lite needs the ``jieba`` package; a server brings its own.
    """
    if name == "auto":
        return default_analyzer_params()
    if name not in ANALYZERS:
        raise errors.ConfigValueError(
            f"Unknown BM25 analyzer '{name}'. Valid: {', '.join(ANALYZER_CHOICES)}",
            hint="use 'auto' (jieba when installed), 'standard' or 'jieba'",
        )
    if name == "jieba" and local and importlib.util.find_spec("jieba") is None:
        raise errors.ConfigValueError(
            "The jieba BM25 analyzer needs the 'jieba' package with Milvus Lite, and it is not installed",
            hint="pip install jieba, or choose the 'standard' analyzer",
        )
    return ANALYZERS[name]


def _analyzer_name(params: dict[str, Any]) -> str:
    raw = params.get("analyzer_params")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    if not isinstance(raw, dict):
        return "standard"
    tokenizer = raw.get("tokenizer") or raw.get("type") or "standard"
    if isinstance(tokenizer, dict):
        tokenizer = tokenizer.get("type", "standard")
    return str(tokenizer)


class _BelowWarningFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


#: jieba logs "Building prefix dict ..." at DEBUG through its own stderr handler whenever it loads;
#: Milvus Lite runs jieba in our process, so that would land in the CLI's output. A filter on its
#: logger survives jieba's import (which resets the level) and needs no import of jieba.
_JIEBA_QUIET = _BelowWarningFilter()


def _prepare_jieba() -> None:
    """Before Milvus Lite's first tokenising call: jieba's dictionary, late (memsearch.jieba_loader)."""
    from memsearch.jieba_loader import prepare

    prepare()


# --- the store ------------------------------------------------------------------------------


class MilvusStore:
    """A memsearch chunk collection in Milvus Lite (a local ``.db`` directory) or a Milvus server.

    ``dimension=None`` opens read-only: a missing collection is never created, and reads on it
    raise :class:`~memsearch.errors.CollectionNotFoundError`. ``create=False`` (what ``search``
    uses) checks the dimension of an existing collection but creates nothing at open: a read never
    leaves a store behind, not even the Milvus Lite directory; the first write
    (:meth:`upsert`, :meth:`ensure_collection`) creates what is missing. ``lock_timeout`` is how long to wait
    for a Lite database another process holds. ``analyzer`` (``"auto"``, ``"standard"``,
    ``"jieba"``) is the BM25 analyzer of a collection this store creates. Use as a context manager,
    or call :meth:`close`.
    """

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        token: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        dimension: int | None = 1536,
        description: str = "",
        lock_timeout: float = 10.0,
        analyzer: str = "auto",
        create: bool = True,
        adopt: bool = True,
    ) -> None:
        self._location = resolve_uri(uri)
        # Only used when this store creates the collection; an existing one keeps its analyzer.
        self._analyzer_params = analyzer_params_for(analyzer, local=self._location.is_local)
        self._token = token
        self._collection = collection
        self._dimension = dimension
        self._description = description
        self._lock_timeout = lock_timeout
        self._client: Client | None = None
        self._exists = False
        self._analyzer = "standard"
        self._collection_dimension: int | None = None
        self._analyzer_ready = False
        #: Rows per query page; an attribute so tests can exercise paging on small collections.
        self.page_size = PAGE_SIZE
        self._create = create and dimension is not None
        #: False: open the database without reading the collection (its schema, segments,
        #: indexes), so that :meth:`drop` works on a damaged collection.
        self._adopt = adopt
        self._closed = False
        path = self._location.path
        if path is not None and not self._create and not path.exists():
            return  # nothing to read, and a read must not create the database: connect on a write
        self._connect()

    def _connect(self) -> None:
        self._client = self._CONNECTORS[self._location.kind](self)
        if not self._adopt:
            return
        try:
            self._ensure_collection()
        except BaseException:
            self.close()
            raise

    # -- connecting ---------------------------------------------------------------------------

    def _open_lite(self) -> Client:
        path = self._location.path
        assert path is not None
        if sys.platform == "win32":
            raise errors.StoreConnectionError(
                f"Milvus Lite (the local database {path}) is not available on Windows",
                hint=(
                    "Run a Milvus server, e.g. `docker run -d -p 19530:19530 milvusdb/milvus:latest "
                    "standalone`, and use --milvus-uri http://localhost:19530 "
                    "(MemSearch(milvus_uri='http://localhost:19530')), or run memsearch under WSL2."
                ),
            )
        if path.suffix != ".db":
            raise errors.StoreConnectionError(
                f"Not a Milvus Lite database path: {path} (it must end in .db)",
                hint=(
                    "Use a path like ~/.memsearch/milvus.db, or a server URI starting with "
                    f"{SERVER_PREFIXES}."
                ),
            )
        if path.is_file():
            major = _milvus_lite_major()
            if major is not None and major >= 3:
                raise _legacy_file_error(path, major)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise errors.StoreConnectionError(
                f"Cannot create the directory for the Milvus Lite database {path}: {exc.strerror or exc}",
                hint="Check the path and its permissions, or choose another --milvus-uri.",
            ) from exc

        from memsearch.lite import LiteClient

        logging.getLogger("jieba").addFilter(_JIEBA_QUIET)  # idempotent
        deadline = time.monotonic() + max(0.0, self._lock_timeout)
        waited = False
        while True:
            failure: BaseException | None = None
            with _quiet() as captured:
                try:
                    client = LiteClient(str(path))
                except Exception as exc:
                    if not _is_driver_error(exc):
                        raise
                    failure = exc
            if failure is None:
                return client
            cause = captured[0] if captured else failure
            if type(cause).__name__ != "DataDirLockedError" and not _lock_is_held(path):
                raise _generic_open_error(path, cause) from cause
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.StoreLockedError(
                    f"The Milvus Lite database {path} is in use by {_describe_holders(path)}"
                    + (f" (waited {self._lock_timeout:g} s)" if waited else ""),
                    hint=_locked_hint(path),
                ) from cause
            if not waited:
                logger.info("Waiting up to %g s for the Milvus Lite database %s", self._lock_timeout, path)
                waited = True
            time.sleep(min(LOCK_POLL_INTERVAL, remaining))

    def _open_server(self) -> Client:
        from pymilvus import MilvusClient

        with _quiet():
            try:
                return MilvusClient(uri=self._location.uri, token=self._token or "", timeout=CONNECT_TIMEOUT)
            except Exception as exc:
                if not _is_driver_error(exc):
                    raise
                _, message = _driver_message(exc)
                raise errors.StoreConnectionError(
                    f"Cannot connect to Milvus at {self._location.display}: {message}",
                    hint=(
                        "Check that the server is running and reachable and that the URI and token are "
                        "right (a local Milvus Lite database is a path ending in .db)."
                    ),
                ) from exc

    _CONNECTORS: ClassVar[dict[str, Callable[[MilvusStore], Client]]] = {
        "lite": _open_lite,
        "server": _open_server,
    }

    def _schema_types(self) -> tuple[Any, Any, Any]:
        """(DataType, Function, FunctionType) of this store's driver."""
        if self._location.is_local:
            from memsearch.lite import LiteClient

            return LiteClient.schema_types()
        from pymilvus import DataType, Function, FunctionType

        return DataType, Function, FunctionType

    # -- calling the driver -------------------------------------------------------------------

    def _guard(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a driver function quietly; driver exceptions become memsearch errors."""
        with _quiet():
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not _is_driver_error(exc):
                    raise
                raise self._translate(exc) from exc

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._client is None and not self._closed:
            path = self._location.path
            if path is None or not path.exists():
                raise self._not_found()  # a Lite database that does not exist (yet) holds nothing
            self._connect()  # it appeared since this store was opened
        if self._client is None:
            raise errors.StoreError(
                f"The store for {self._location.display} is closed", hint="Open a new MilvusStore."
            )
        return self._guard(getattr(self._client, method), *args, **kwargs)

    def _translate(self, exc: BaseException) -> errors.StoreError:
        code, message = _driver_message(exc)
        missing = code == _COLLECTION_NOT_FOUND or type(exc).__name__ == "CollectionNotFoundError"
        if missing and self._collection in message:
            self._exists = False
            return self._not_found()
        if self._location.path is not None and _is_damage(exc):
            return _damaged_error(self._location.path, exc)
        label = f"Milvus error (code {code})" if code is not None else "Milvus error"
        return errors.StoreError(f"{label}: {message}", hint=_GENERIC_HINT)

    def _not_found(self) -> errors.CollectionNotFoundError:
        return errors.CollectionNotFoundError(
            f"No collection '{self._collection}' at {self._location.display}",
            hint="Run `memsearch index <paths>` first (or check --collection / --milvus-uri).",
        )

    # -- the collection -----------------------------------------------------------------------

    def _ensure_collection(self) -> None:
        if self._call("has_collection", self._collection):
            self._adopt_existing()
        elif self._create:
            self._create_collection()

    def ensure_collection(self, dimension: int | None = None) -> None:
        """Make the collection exist before a write: adopt it if it appeared, else create it (with
        ``dimension`` when this store was opened without one); connects first if it had not."""
        if self._exists:
            return
        if self._dimension is None:
            self._dimension = dimension
        if self._dimension is None:
            raise self._not_found()
        self._create = True
        if self._client is None and not self._closed:
            self._connect()
        else:
            self._ensure_collection()

    def check_dimension(self, dimension: int) -> None:
        """Set the vector dimension of this store's embedding model (a store opened without one):
        raise :class:`~memsearch.errors.DimensionMismatchError` when the existing collection has
        another; a missing collection is later created with it."""
        existing = self._collection_dimension if self._exists else None
        if existing is not None and existing != dimension:
            raise self._mismatch(existing, dimension)
        self._dimension = dimension

    def _mismatch(self, existing: int, dimension: int) -> errors.DimensionMismatchError:
        return errors.DimensionMismatchError(
            f"Embedding dimension mismatch: collection '{self._collection}' has dim={existing} "
            f"but the current embedding provider outputs dim={dimension}. Run 'memsearch reset "
            "--yes' to drop the collection and re-index, or use a different --milvus-uri / --collection.",
            hint="after the reset, `memsearch index --force <paths>` rebuilds the index",
        )

    def _adopt_existing(self) -> None:
        info = self._call("describe_collection", self._collection)
        fields = {field.get("name"): field for field in info.get("fields", [])}
        dim_raw = fields.get("embedding", {}).get("params", {}).get("dim")
        existing_dim = int(dim_raw) if dim_raw is not None else None
        if self._dimension is not None and existing_dim is not None and existing_dim != self._dimension:
            raise self._mismatch(existing_dim, self._dimension)
        self._collection_dimension = existing_dim
        self._analyzer = _analyzer_name(fields.get("content", {}).get("params", {}))
        properties = info.get("properties") or {}
        self._description = info.get("description") or str(properties.get(_DESCRIPTION_PROPERTY, ""))
        # A reopened Lite database starts with its collections released (§6.3).
        self._call("load_collection", self._collection)
        self._exists = True

    def _create_collection(self) -> None:
        assert self._dimension is not None and self._client is not None
        DataType, Function, FunctionType = self._schema_types()
        analyzer_params = self._analyzer_params
        schema = self._client.create_schema(enable_dynamic_field=True, description=self._description)
        schema.add_field(
            "chunk_hash", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["chunk_hash"], is_primary=True
        )
        schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=self._dimension)
        content_params: dict[str, Any] = {"max_length": FIELD_MAX_BYTES["content"], "enable_analyzer": True}
        if analyzer_params is not None:
            content_params["analyzer_params"] = analyzer_params
        schema.add_field("content", DataType.VARCHAR, **content_params)
        schema.add_field("sparse_vector", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("source", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["source"])
        schema.add_field("heading", DataType.VARCHAR, max_length=FIELD_MAX_BYTES["heading"])
        schema.add_field("heading_level", DataType.INT64)
        schema.add_field("start_line", DataType.INT64)
        schema.add_field("end_line", DataType.INT64)
        schema.add_function(
            Function(
                name="bm25_fn",
                function_type=FunctionType.BM25,
                input_field_names=["content"],
                output_field_names=["sparse_vector"],
            )
        )
        index_params = self._client.prepare_index_params()
        index_params.add_index(field_name="embedding", index_type="FLAT", metric_type="COSINE")
        index_params.add_index(
            field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
        )
        # Milvus Lite drops schema descriptions; a collection property keeps it there too.
        properties = {_DESCRIPTION_PROPERTY: self._description} if self._description else {}
        try:
            self._call(
                "create_collection",
                self._collection,
                schema=schema,
                consistency_level="Strong",  # a hook's write is visible to the next prompt's search
                properties=properties,
            )
        except errors.StoreError:
            if self._call("has_collection", self._collection):  # another process created it first
                self._adopt_existing()
                return
            raise
        # Indexes on an empty collection are ready at once; pymilvus's default synchronous wait
        # polls every 0.5 s per index (a full second per new collection) for nothing.
        self._call("create_index", self._collection, index_params, sync=False)
        self._call("load_collection", self._collection)
        self._collection_dimension = self._dimension
        self._analyzer = _analyzer_name({"analyzer_params": analyzer_params})
        self._exists = True

    def _require_collection(self) -> None:
        """Raise CollectionNotFoundError unless the collection exists (it may have appeared since)."""
        if self._exists:
            return
        if self._call("has_collection", self._collection):
            self._adopt_existing()
            return
        raise self._not_found()

    def _ready_analyzer(self) -> None:
        """Before the first tokenising call on Lite, prepare jieba in this process (see _prepare_jieba)."""
        if self._analyzer_ready:
            return
        self._analyzer_ready = True
        if self._location.is_local and self._analyzer == "jieba":
            _prepare_jieba()

    # -- properties ---------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The store's location for display (Lite: the resolved path; server: URI, credentials redacted)."""
        return self._location.display

    @property
    def location(self) -> StoreLocation:
        return self._location

    @property
    def is_local(self) -> bool:
        return self._location.is_local

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def exists(self) -> bool:
        """Whether the collection exists (as far as this store knows)."""
        return self._exists

    @property
    def dimension(self) -> int | None:
        """The collection's vector dimension (the requested one before creation; None if unknown)."""
        return self._collection_dimension if self._exists else self._dimension

    @property
    def description(self) -> str:
        return self._description

    @property
    def analyzer(self) -> str:
        """The ``content`` field's BM25 tokenizer: ``"jieba"`` or ``"standard"``."""
        return self._analyzer

    # -- writing ------------------------------------------------------------------------------

    def upsert(self, chunks: Sequence[dict[str, Any]]) -> int:
        """Insert or replace chunks by ``chunk_hash``; returns how many rows were written.

        Extra keys go to dynamic fields. Long text fields are truncated (see module docstring);
        duplicate hashes in one call keep the last row.
        """
        if not chunks:
            return 0
        self.ensure_collection()
        self._ready_analyzer()
        written = 0
        for batch in _batches(_prepare_rows(chunks)):
            result = self._call("upsert", self._collection, data=batch)
            count = result.get("upsert_count") if isinstance(result, dict) else None
            written += int(count) if count is not None else len(batch)
        return written

    def delete_by_source(self, source: str) -> None:
        """Delete every chunk of one source file."""
        self._require_collection()
        self._call("delete", self._collection, filter=_source_equals(source))

    def delete_by_hashes(self, hashes: Iterable[str]) -> None:
        """Delete chunks by primary key (no-op for none)."""
        ids = list(dict.fromkeys(hashes))
        if not ids:
            return
        self._require_collection()
        for batch in _chunked(ids, DELETE_BATCH):
            self._call("delete", self._collection, ids=list(batch))

    def drop(self) -> None:
        """Drop the collection if it exists (a no-op otherwise)."""
        if self._client is not None and self._call("has_collection", self._collection):
            self._call("drop_collection", self._collection)
        self._exists = False

    # -- searching ----------------------------------------------------------------------------

    def search(
        self,
        query_embedding: Sequence[float],
        *,
        query_text: str = "",
        top_k: int = 10,
        filter_expr: str = "",
        mode: str = "hybrid",
        weights: tuple[float, float] | None = None,
    ) -> list[dict[str, Any]]:
        """Hybrid dense + BM25 search fused by RRF (k=60); ``score`` is 1.0 for rank 1 in both lists.

        ``weights`` (dense, BM25) makes the fusion weighted RRF (see :func:`fuse`); ``None`` is plain
        RRF, as in the original (the fusion Milvus' RRF ranker computes; only the order of exact
        ties may differ). The fusion is computed here from the two legs' hits, the same way on
        Lite and on a server. ``mode`` ``"dense"`` or ``"sparse"`` asks one leg alone (the
        evaluation's baselines); its ``score`` is that leg's own measure: cosine similarity, or the
        BM25 score.
        """
        if mode not in SEARCH_MODES:
            raise errors.ConfigValueError(
                f"Unknown search mode '{mode}'. Valid: {', '.join(SEARCH_MODES)}",
                hint="use 'hybrid' (the default), 'dense' or 'sparse'",
            )
        queries: dict[str, Sequence[float] | str] = {"dense": query_embedding, "sparse": query_text}
        if mode in LEGS:
            score = LEGS[mode][2]
            hits = self.search_leg(mode, queries[mode], top_k=top_k, filter_expr=filter_expr)
            return [self._hit_to_result(hit, score) for hit in hits]
        ranked = {
            leg: self.search_leg(leg, queries[leg], top_k=top_k, filter_expr=filter_expr) for leg in LEGS
        }
        return fuse(ranked, weights, top_k)

    def search_leg(
        self, leg: str, query: Sequence[float] | str, *, top_k: int, filter_expr: str = ""
    ) -> list[Any]:
        """One retriever's raw hits, best first: ``"dense"`` (``query`` is the embedding) or
        ``"sparse"`` (``query`` is the text, scored by BM25). Combine legs with :func:`fuse`.

        The two legs are separate calls so a caller can run the BM25 leg before the query vector
        exists (``MemSearch.search`` does on a cold start, while the model loads).
        """
        self._require_collection()
        if top_k <= 0:
            return []
        field, params, _ = LEGS[leg]
        if leg == "sparse":
            self._ready_analyzer()
        data: list[Any] = [query or ""] if leg == "sparse" else [list(query)]
        try:
            found = self._call(
                "search",
                self._collection,
                data=data,
                anns_field=field,
                search_params=params,
                limit=top_k,
                filter=filter_expr,
                output_fields=_QUERY_FIELDS,
            )
        except errors.CollectionNotFoundError:
            raise
        except errors.StoreError:
            # BM25 over an empty collection can fail on Milvus server (NaN average length). Row-count
            # stats lag there, so ask a consistent query instead of trusting them.
            if self._is_empty():
                return []
            raise
        return list(found[0]) if found else []

    @staticmethod
    def _hit_to_result(hit: Any, score: Callable[[float], float]) -> dict[str, Any]:
        """A result dict; ``score`` maps the driver's distance to the result's score."""
        entity = hit.get("entity") or {}
        result = {field: entity.get(field) for field in _QUERY_FIELDS}
        if result["chunk_hash"] is None:
            result["chunk_hash"] = hit.get("chunk_hash", hit.get("id"))
        distance = float(hit.get("distance", 0.0))
        result["score"] = float(score(distance))
        return result

    def _is_empty(self) -> bool:
        rows = self._call(
            "query", self._collection, filter='chunk_hash != ""', output_fields=["chunk_hash"], limit=1
        )
        return not rows

    # -- scalar queries -----------------------------------------------------------------------

    def _iter_rows(self, filter_expr: str, fields: list[str]) -> Iterator[dict[str, Any]]:
        """All rows matching ``filter_expr``, a page at a time.

        One plain query answers small results; when a full page comes back, a query iterator
        (primary-key cursor) walks the rest without Milvus's 16,384 offset+limit window.
        """
        self._require_collection()
        page = max(1, int(self.page_size))
        first = self._call("query", self._collection, filter=filter_expr, output_fields=fields, limit=page)
        if len(first) < page:
            yield from first
            return
        iterator = self._call(
            "query_iterator", self._collection, batch_size=page, filter=filter_expr, output_fields=fields
        )
        try:
            while True:
                batch = self._guard(iterator.next)
                if not batch:
                    return
                yield from batch
        finally:
            with contextlib.suppress(Exception), _quiet():
                iterator.close()

    def query(self, *, filter_expr: str = "") -> list[dict[str, Any]]:
        """Every chunk matching ``filter_expr`` (all chunks when empty), with the seven result fields."""
        expr = filter_expr or 'chunk_hash != ""'
        return [
            {field: row.get(field) for field in _QUERY_FIELDS} for row in self._iter_rows(expr, _QUERY_FIELDS)
        ]

    def get_by_hash(self, chunk_hash: str) -> dict[str, Any] | None:
        """The chunk with this primary key, or None."""
        self._require_collection()
        rows = self._call(
            "query",
            self._collection,
            filter=f'chunk_hash == "{escape_filter_value(chunk_hash)}"',
            output_fields=_QUERY_FIELDS,
            limit=1,
        )
        return {field: rows[0].get(field) for field in _QUERY_FIELDS} if rows else None

    def hashes_by_source(self, source: str) -> set[str]:
        """Chunk hashes stored for one source file."""
        return {row["chunk_hash"] for row in self._iter_rows(_source_equals(source), ["chunk_hash"])}

    def hashes_by_sources(self, sources: Iterable[str]) -> dict[str, set[str]]:
        """Chunk hashes for many source files with few queries; every requested source is a key."""
        wanted = list(dict.fromkeys(sources))
        result: dict[str, set[str]] = {source: set() for source in wanted}
        by_stored: dict[str, list[str]] = {}
        for source in wanted:
            by_stored.setdefault(_stored_value("source", source), []).append(source)
        stored = list(by_stored)
        for batch in _chunked(stored, max(1, IN_BATCH)):
            values = ", ".join(f'"{escape_filter_value(value)}"' for value in batch)
            for row in self._iter_rows(f"source in [{values}]", ["chunk_hash", "source"]):
                for source in by_stored.get(row["source"], ()):
                    result[source].add(row["chunk_hash"])
        return result

    def sources_with_counts(self) -> dict[str, int]:
        """Every indexed source file with its number of chunks."""
        return dict(Counter(row["source"] for row in self._iter_rows('chunk_hash != ""', ["source"])))

    def indexed_sources(self) -> set[str]:
        """Every source file that has at least one chunk."""
        return set(self.sources_with_counts())

    def count(self) -> int:
        """Number of chunks, from a consistent ``count(*)`` (row-count stats lag on a server)."""
        self._require_collection()
        rows = self._call("query", self._collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def flush(self) -> None:
        """Seal recent writes. On Milvus Lite, rows still in the write buffer are searched row by row
        in Python (2,000 fresh rows: ~125 ms a search, ~14 ms after a flush), so the indexer flushes
        after a run that changed anything."""
        self._require_collection()
        self._call("flush", self._collection)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Disconnect; for Lite, release the database so another process can open it. Idempotent."""
        client, self._client = self._client, None
        self._closed = True
        if client is None:
            return
        with contextlib.suppress(Exception), _quiet():
            client.close()

    def __enter__(self) -> MilvusStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MilvusStore(uri={self.uri!r}, collection={self._collection!r})"
