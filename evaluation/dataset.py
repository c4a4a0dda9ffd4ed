"""The dataset format: a folder ``corpus/**.md`` plus ``queries.jsonl``.

Each line of ``queries.jsonl`` is one query::

    {"qid": "faq-1.3", "query": "...", "category": "basics",
     "gold": [{"path": "ch01.md", "start_line": 12, "end_line": 30}]}

``path`` is relative to ``corpus/`` (always with ``/``); lines are 1-based and inclusive, as in a
memsearch search result. A query with several gold spans is answered by any of them (MRR) and
fully answered when all are found (recall).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

QUERIES_FILE = "queries.jsonl"
CORPUS_DIR = "corpus"


class DatasetError(ValueError):
    """A dataset folder or ``queries.jsonl`` line is malformed; the message says where."""


@dataclass(frozen=True)
class Gold:
    """One relevant span: a corpus-relative path and an inclusive 1-based line range."""

    path: str
    start_line: int
    end_line: int

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line}


@dataclass(frozen=True)
class Query:
    qid: str
    query: str
    category: str
    gold: tuple[Gold, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "qid": self.qid,
            "query": self.query,
            "category": self.category,
            "gold": [g.to_dict() for g in self.gold],
        }


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: where its corpus is, and its queries in file order."""

    name: str
    root: Path
    queries: tuple[Query, ...]

    @property
    def corpus(self) -> Path:
        return self.root / CORPUS_DIR

    def categories(self) -> list[str]:
        return sorted({q.category for q in self.queries})


def _parse_gold(raw: object, where: str) -> Gold:
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: a gold entry must be an object")
    try:
        path, start, end = raw["path"], raw["start_line"], raw["end_line"]
    except KeyError as exc:
        raise DatasetError(f"{where}: gold entry lacks {exc.args[0]!r}") from None
    if not isinstance(path, str) or not path or not isinstance(start, int) or not isinstance(end, int):
        raise DatasetError(f"{where}: gold needs a path string and integer start_line/end_line")
    if start < 1 or end < start:
        raise DatasetError(f"{where}: bad line span {start}-{end}")
    return Gold(path.replace("\\", "/"), start, end)


def parse_query(line: str, where: str) -> Query:
    """One ``queries.jsonl`` line; ``where`` (file:line) prefixes every error message."""
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise DatasetError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: a query must be a JSON object")
    for key in ("qid", "query", "gold"):
        if key not in raw:
            raise DatasetError(f"{where}: missing {key!r}")
    gold = raw["gold"]
    if not isinstance(gold, list) or not gold:
        raise DatasetError(f"{where}: 'gold' must be a non-empty list")
    return Query(
        str(raw["qid"]),
        str(raw["query"]),
        str(raw.get("category") or "all"),
        tuple(_parse_gold(g, where) for g in gold),
    )


def load_dataset(root: Path, name: str | None = None) -> Dataset:
    """Load ``root/queries.jsonl`` (checking that ``root/corpus`` exists and qids are unique)."""
    queries_file = root / QUERIES_FILE
    if not (root / CORPUS_DIR).is_dir():
        raise DatasetError(f"{root}: no {CORPUS_DIR}/ folder")
    if not queries_file.is_file():
        raise DatasetError(f"{root}: no {QUERIES_FILE}")
    queries: list[Query] = []
    seen: set[str] = set()
    for number, line in enumerate(queries_file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        query = parse_query(line, f"{queries_file}:{number}")
        if query.qid in seen:
            raise DatasetError(f"{queries_file}:{number}: duplicate qid {query.qid!r}")
        seen.add(query.qid)
        queries.append(query)
    return Dataset(name or root.name, root, tuple(queries))


def write_queries(path: Path, queries: Iterable[Query]) -> None:
    """Write queries as JSON lines (UTF-8, non-ASCII kept readable)."""
    lines = [json.dumps(q.to_dict(), ensure_ascii=False) for q in queries]
    path.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
