"""Development sets built from text that installed packages ship, at evaluation time.

Third-party text is never committed: each builder reads files that ``apt-get install`` or
``pip install`` put on this machine, converts them to markdown (the format memsearch indexes),
derives queries and gold line spans, and writes ``corpus/`` + ``queries.jsonl`` under
``evaluation/.cache/sets/<name>``. A set is rebuilt only when its sources or the builder change.

The sets (the README says why each one is there):

- ``debian-faq`` (Debian package ``debian-faq``): every numbered FAQ entry whose title is a
  question becomes a query; its answer section is the gold. The question is removed from the
  indexed text (the heading keeps only the entry's number), so retrieval has to match the answer.
- ``gitfaq`` (Debian package ``git-doc``): the same for the questions of gitfaq(7); the corpus
  adds ten of git's conceptual guides (tutorials, workflows, credentials, hooks, attributes, ...) so
  that the answers compete with nearby documentation.
- ``manpages-zh`` (Debian package ``manpages-zh``, sections 1 and 8, pages whose file name starts
  with a-m, at most 20 KB of troff): the query is the page's Chinese NAME-line description, the gold
  is the page; the NAME line is removed.
- ``cri-persona`` (PyPI package ``cri-benchmark``, MIT): a 289-day persona chat rendered as daily
  memory journals in memsearch's journal format; queries come from the package's ground truth
  (fact changes, contradicting statements, signal messages) and the gold is the messages it names.
- ``man-en2zh`` and ``man-zh2en`` (Debian packages ``manpages-zh`` and the English pages of the
  same commands, :mod:`evaluation.crosslingual`): a page's NAME line in one language asks for the
  page in the other, both directions across languages.
- ``dated-journals`` (our own text, :mod:`evaluation.dated`): 100 days of journals up to today where
  topics recur with different decisions; time-scoped and plain questions. Rebuilt when the day
  changes; evaluated through ``MemSearch`` itself (:mod:`evaluation.dated_run`).

Parsers are pure functions of the text, so tests feed them small synthetic inputs.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import importlib.util
import json
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.dataset import CORPUS_DIR, QUERIES_FILE, Dataset, Gold, Query, load_dataset, write_queries

#: Bump when any builder's output changes, so cached sets are rebuilt.
BUILDER_VERSION = 5

DEBIAN_FAQ_FILE = Path("/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz")
GIT_DOC_DIR = Path("/usr/share/doc/git-doc")
MANPAGES_ZH_DIR = Path("/usr/share/man/zh_CN")
CRI_PERSONA = "persona-1-base"

#: git's conceptual guides added to the gitfaq corpus as competing documentation.
GIT_GUIDES = (
    "gittutorial.txt",
    "gittutorial-2.txt",
    "gitworkflows.txt",
    "giteveryday.txt",
    "gitcredentials.txt",
    "gitignore.txt",
    "gitattributes.txt",
    "githooks.txt",
    "gitcli.txt",
    "gitsubmodules.txt",
)
#: Chinese man pages larger than this (troff source) are left out: the few giants (bash, mdoc
#: samples, keysyms) would dominate indexing time while adding four queries.
MAN_MAX_BYTES = 20_000
#: Man page file names starting with these letters (the issue's a-m half).
MAN_LETTERS = "abcdefghijklm"
#: Only user commands (1) and administration commands (8): their NAME lines say what a command
#: does, as a person would ask for it; together they keep the set at ~150 queries, ~1,500 chunks.
MAN_SECTIONS = ("man1", "man8")


class SourceMissingError(RuntimeError):
    """The package a set is built from is not installed; ``hint`` is the install command."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class BuiltSet:
    """A set in memory: corpus files (relative path -> markdown) and queries."""

    files: dict[str, str] = field(default_factory=dict)
    queries: list[Query] = field(default_factory=list)


class _Doc:
    """A markdown file being written, tracking 1-based line numbers for gold spans."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @property
    def next_line(self) -> int:
        return len(self.lines) + 1

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def last_content_line(self) -> int:
        """1-based number of the last non-blank line."""
        n = len(self.lines)
        while n > 0 and not self.lines[n - 1].strip():
            n -= 1
        return n

    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"


def _escape_md(line: str) -> str:
    """Keep a body line from being read as a markdown heading."""
    return "\\" + line if line.lstrip().startswith("#") else line


# --- debian-faq ---------------------------------------------------------------------------------

_FAQ_CHAPTER = re.compile(r"Chapter (\d+)\. (.+)")
_FAQ_SECTION = re.compile(r"(\d+(?:\.\d+)+)\. (\S.*)")


@dataclass
class FaqEntry:
    number: str
    title: str
    body: list[str]


@dataclass
class FaqChapter:
    number: str
    title: str
    intro: list[str]
    entries: list[FaqEntry]


def parse_debian_faq(text: str) -> list[FaqChapter]:
    """Chapters and numbered entries of the FAQ's plain-text edition.

    Body text is indented; chapter lines (``Chapter N. Title``) and entry titles (``N.M. Title``,
    possibly wrapped onto further unindented lines until a blank line) start in column 0. The
    table of contents before ``Chapter 1.`` is skipped.
    """
    lines = text.replace("\u00a0", " ").splitlines()  # the text edition puts NBSP after numbers
    start = next((i for i, line in enumerate(lines) if _FAQ_CHAPTER.fullmatch(line)), len(lines))
    chapters: list[FaqChapter] = []
    entry: FaqEntry | None = None
    in_title = False
    for line in lines[start:]:
        chapter = _FAQ_CHAPTER.fullmatch(line)
        section = _FAQ_SECTION.fullmatch(line) if line[:1].isdigit() else None
        if chapter:
            chapters.append(FaqChapter(chapter.group(1), chapter.group(2).strip(), [], []))
            entry, in_title = None, False
        elif section and chapters:
            entry = FaqEntry(section.group(1), section.group(2).strip(), [])
            chapters[-1].entries.append(entry)
            in_title = True
        elif in_title and entry is not None and line.strip() and not line[:1].isspace():
            entry.title += " " + line.strip()
        else:
            in_title = False
            if not chapters:
                continue
            body = entry.body if entry is not None else chapters[-1].intro
            body.append(line[4:] if line.startswith("    ") else line.strip())
    return chapters


def faq_category(question: str) -> str:
    """A coarse question type from the first word: what / how / why / yes-no / other."""
    first = question.split(" ", 1)[0].lower().strip("`'\"")
    table = {
        "what": "what",
        "what's": "what",
        "which": "what",
        "who": "what",
        "where": "what",
        "how": "how",
        "why": "why",
    }
    yes_no = {"is", "are", "can", "could", "does", "do", "will", "should", "may", "must", "has", "have"}
    return table.get(first, "yes-no" if first in yes_no else "other")


def _body_has_text(body: Iterable[str]) -> bool:
    return sum(len(line.strip()) for line in body) >= 40


def build_debian_faq(text: str) -> BuiltSet:
    """One markdown file per chapter; question entries lose their title and become queries."""
    built = BuiltSet()
    for chapter in parse_debian_faq(text):
        doc = _Doc()
        path = f"ch{int(chapter.number):02d}.md"
        doc.add(f"# Chapter {chapter.number}. {chapter.title}", "")
        doc.add(*(_escape_md(line) for line in _trim(chapter.intro)))
        for entry in chapter.entries:
            is_question = "?" in entry.title
            level = "#" * min(6, entry.number.count(".") + 1)
            doc.blank()
            start = doc.next_line
            doc.add(f"{level} {entry.number}." if is_question else f"{level} {entry.number}. {entry.title}")
            doc.add("", *(_escape_md(line) for line in _trim(entry.body)))
            if is_question and _body_has_text(entry.body):
                built.queries.append(
                    Query(
                        f"faq-{entry.number}",
                        entry.title,
                        faq_category(entry.title),
                        (Gold(path, start, doc.last_content_line()),),
                    )
                )
        built.files[path] = doc.text()
    return built


def _trim(lines: Sequence[str]) -> list[str]:
    """Lines without leading and trailing blank lines."""
    items = list(lines)
    while items and not items[0].strip():
        items.pop(0)
    while items and not items[-1].strip():
        items.pop()
    return items


# --- asciidoc (git-doc) -------------------------------------------------------------------------

_SETEXT = {"=": "#", "-": "##", "~": "###", "^": "####", "+": "#####"}
_LINKGIT = re.compile(r"linkgit:([\w.-]+)\[(\d+)\]")
_DROP_ASCIIDOC = re.compile(
    r"(include|ifdef|ifndef|endif)::.*|\[\[[^\]]*\]\]|\[(verse|literal|listing)\]|//.*"
)


def _underline_level(title: str, underline: str) -> str | None:
    """The markdown heading prefix when ``underline`` is a setext underline of ``title``."""
    if len(underline) < 2 or len(set(underline)) != 1 or underline[0] not in _SETEXT:
        return None
    if not title.strip() or title.strip() == "+" or abs(len(title.rstrip()) - len(underline)) > 2:
        return None
    return _SETEXT[underline[0]]


def asciidoc_lines(text: str) -> list[str]:
    """Git's asciidoc as markdown lines: setext titles become headings, ``----`` blocks fences,
    ``+`` continuations blank lines, ``linkgit:x[1]`` becomes ``x(1)``, directives are dropped."""
    src = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(src):
        line = src[i].rstrip()
        nxt = src[i + 1].rstrip() if i + 1 < len(src) else ""
        level = _underline_level(line, nxt) if line else None
        if level:
            out.extend(["", f"{level} {line.strip()}", ""])
            i += 2
            continue
        i += 1
        stripped = line.strip()
        if _DROP_ASCIIDOC.fullmatch(stripped):
            continue
        if stripped == "+":
            out.append("")
        elif re.fullmatch(r"-{4,}|\.{4,}", stripped):
            out.append("```")
        else:
            out.append(_escape_md(_LINKGIT.sub(r"\1(\2)", line.lstrip("\t"))))
    return out


@dataclass
class GitFaqItem:
    section: str
    question: str
    body: list[str]


_GITFAQ_QUESTION = re.compile(r"(\S.*)::")


def build_gitfaq(faq_text: str, guides: dict[str, str]) -> BuiltSet:
    """gitfaq(7) with each question replaced by a neutral ``Q<n>`` heading, plus the guides."""
    built = BuiltSet()
    doc = _Doc()
    lines = asciidoc_lines_keep_anchors(faq_text)
    section = "general"
    n = 0
    i = 0
    pending: tuple[str, int] | None = None  # (question, start line) of the entry being written

    def close() -> None:
        if pending is None:
            return
        question, start = pending
        end = doc.last_content_line()
        if end > start:
            built.queries.append(Query(f"gitfaq-{n}", question, section, (Gold("gitfaq.md", start, end),)))

    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            close()
            pending = None
            section = line.lstrip("#").strip().lower()
            doc.blank()
            doc.add(line)
            i += 1
            continue
        if line.startswith("[[") and i + 1 < len(lines) and _GITFAQ_QUESTION.fullmatch(lines[i + 1]):
            close()
            n += 1
            doc.blank()
            pending = (_GITFAQ_QUESTION.fullmatch(lines[i + 1]).group(1).strip(), doc.next_line)  # type: ignore[union-attr]
            doc.add(f"### Q{n}", "")
            i += 2
            continue
        if not line.strip():
            doc.blank()  # one blank line at most, none at the top: line numbers stay final
        elif not line.startswith("[["):
            doc.add(line)
        i += 1
    close()
    built.files["gitfaq.md"] = doc.text()
    for name, text in sorted(guides.items()):
        built.files[f"guides/{Path(name).stem}.md"] = _squeeze("\n".join(asciidoc_lines(text)) + "\n")
    return built


def asciidoc_lines_keep_anchors(text: str) -> list[str]:
    """Like :func:`asciidoc_lines`, but ``[[anchor]]`` lines survive (they mark FAQ entries)."""
    marked = re.sub(r"^\[\[([^\]]*)\]\]$", r"@@ANCHOR \1", text, flags=re.MULTILINE)
    return [f"[[{line[9:]}]]" if line.startswith("@@ANCHOR ") else line for line in asciidoc_lines(marked)]


def _squeeze(text: str) -> str:
    """Collapse runs of blank lines to one and strip leading blank lines."""
    return re.sub(r"\n{3,}", "\n\n", text).lstrip("\n")


# --- manpages-zh (troff) ------------------------------------------------------------------------

_ESCAPES = {
    "\\-": "-",
    "\\e": "\\",
    "\\&": "",
    "\\ ": " ",
    "\\,": "",
    "\\/": "",
    "\\|": "",
    "\\^": "",
    "\\~": " ",
    "\\(em": "—",
    "\\(en": "–",
    "\\(aq": "'",
    "\\'": "'",
    "\\(dq": '"',
    "\\(lq": "“",
    "\\(rq": "”",
    "\\(bu": "•",
    "\\(co": "©",
}
_ESCAPE_RE = re.compile(
    r"\\f(?:\(..|\[[^\]]*\]|.)|\\s[+-]?\d+|\\\*(?:\(..|\[[^\]]*\]|.)|\\\(..|\\[-e& ,/|^~']|\\\""
)
_FONT_MACROS = {"B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB"}
_BREAK_MACROS = {"PP", "LP", "P", "sp", "br", "TP", "HP", "IP", "RS", "RE", "nf", "fi", "in", "ti"}
CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_NAME_TITLES = ("NAME", "名称", "名字", "名 称")


def troff_text(text: str) -> str:
    """Inline troff escapes removed or replaced by the characters they stand for."""

    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == '\\"':
            return "\0"  # comment marker: cut below
        return _ESCAPES.get(token, "")

    return _ESCAPE_RE.sub(sub, text).split("\0", 1)[0].rstrip()


def _join_args(name: str, rest: str) -> str:
    parts = re.findall(r'"([^"]*)"|(\S+)', rest)
    args = [quoted or bare for quoted, bare in parts]
    # Alternating-font macros (BR, IR...) join their arguments without spaces.
    sep = "" if len(name) == 2 and name not in {"SM", "SB"} else " "
    return troff_text(sep.join(args))


@dataclass
class ManPage:
    """A man page as markdown lines, and the NAME line's description (None when absent)."""

    title: str
    lines: list[str]
    description: str | None


def parse_man_page(source: str) -> ManPage | None:
    """Convert a man(7) page to markdown; the NAME section's text is taken out as the description.

    Returns None for pages this converter does not handle: ``.so`` redirections and mdoc(7) pages.
    Headings: ``.TH`` -> ``#``, ``.SH`` -> ``##``, ``.SS`` -> ``###``; font macros become their
    text; paragraph macros become blank lines; other requests are dropped.
    """
    raw_lines = source.splitlines()
    if any(line.startswith((".so ", ".Dd", ".Sh ")) for line in raw_lines[:40]):
        return None
    lines: list[str] = []
    title = ""
    name_text: list[str] = []
    state = "before"  # before / in / after the NAME section
    for raw in raw_lines:
        if raw.startswith(('.\\"', "'\\\"")) or raw.strip() in {".", "'"}:
            continue
        request = re.match(r"[.'](\S+)\s*(.*)", raw) if raw.startswith((".", "'")) else None
        if raw.startswith((".", "'")) and request is None:
            continue
        if request is None:
            text: str | None = troff_text(raw)
        else:
            name, rest = request.group(1), request.group(2)
            args = [q or b for q, b in re.findall(r'"([^"]*)"|(\S+)', rest)]
            text = None
            if name == "TH":
                title = troff_text(f"{args[0]}({args[1]})" if len(args) > 1 else rest)
                lines.extend([f"# {title}", ""])
            elif name in {"SH", "SS"}:
                heading = troff_text(" ".join(args))
                if state == "in":
                    state = "after"
                if name == "SH" and state == "before" and any(t in heading.upper() for t in _NAME_TITLES):
                    state = "in"
                lines.extend(["", f"{'##' if name == 'SH' else '###'} {heading}", ""])
            elif name in _FONT_MACROS:
                text = _join_args(name, rest)
            elif name == "IP" and args:
                lines.append("")
                text = troff_text(args[0])
            elif name in _BREAK_MACROS and state != "in":
                lines.append("")
        if text is None:
            continue
        if state == "in":
            name_text.append(text)
        elif text or (lines and lines[-1]):
            lines.append(_escape_md(text))
    out: list[str] = []
    for line in lines:  # squeeze blank runs
        if line.strip() or (out and out[-1].strip()):
            out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    return ManPage(title, out, _description(" ".join(t for t in name_text if t.strip())))


def _description(name_line: str) -> str | None:
    """The part of a NAME line after ``name -`` (None when there is no separator)."""
    m = re.search(r"\s+-+\s*|\s*—\s*", name_line)
    if m is None:
        return None
    text = name_line[m.end() :].strip()
    return text or None


def build_manpages_zh(pages: dict[str, str]) -> BuiltSet:
    """Pages (relative path -> troff source) as markdown; Chinese descriptions become queries.

    A description shared by several pages has all of them as gold. Pages without a Chinese
    description stay in the corpus as competing text.
    """
    built = BuiltSet()
    by_description: dict[str, list[Gold]] = {}
    categories: dict[str, str] = {}
    for rel, source in sorted(pages.items()):
        page = parse_man_page(source)
        if page is None or len(page.lines) < 3:
            continue
        path = rel.removesuffix(".gz") + ".md"
        built.files[path] = "\n".join(page.lines) + "\n"
        if page.description and CJK_RE.search(page.description):
            by_description.setdefault(page.description, []).append(Gold(path, 1, len(page.lines)))
            categories.setdefault(page.description, Path(rel).parent.name or "man")
    for n, (description, gold) in enumerate(sorted(by_description.items(), key=lambda kv: kv[1][0].path)):
        built.queries.append(Query(f"man-{n + 1}", description, categories[description], tuple(gold)))
    return built


# --- cri-benchmark persona → daily memory journals ----------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def build_cri_journals(messages: Sequence[dict], ground_truth: dict) -> BuiltSet:
    """Render the chat as ``memory/YYYY-MM-DD.md`` journals; ground truth → queries.

    Journal layout follows memsearch's capture hooks: ``# date``, ``## Session HH:MM`` per session,
    ``### HH:MM`` per turn (a user message and the replies to it) with a session anchor comment,
    and one bullet line per message, so each gold message is exactly one line.
    """
    built = BuiltSet()
    where: dict[int, Gold] = {}
    content: dict[int, str] = {}
    by_day: dict[str, list[dict]] = {}
    for msg in sorted(messages, key=lambda m: (str(m["timestamp"]), int(m["message_id"]))):
        by_day.setdefault(str(msg["timestamp"])[:10], []).append(msg)
    for day, day_messages in sorted(by_day.items()):
        path = f"memory/{day}.md"
        doc = _Doc()
        doc.add(f"# {day}")
        session = None
        for msg in day_messages:
            hhmm = str(msg["timestamp"])[11:16]
            if msg.get("session_id") != session:
                session = msg.get("session_id")
                doc.blank()
                doc.add(f"## Session {hhmm}")
            if msg["role"] == "user" or doc.lines[-1].startswith("## Session"):
                doc.blank()
                doc.add(f"### {hhmm}", f"<!-- session:{session} turn:m{msg['message_id']} -->")
            speaker = "User" if msg["role"] == "user" else "Assistant"
            text = _one_line(str(msg["content"]))
            doc.add(f"- {speaker}: {text}")
            mid = int(msg["message_id"])
            where[mid] = Gold(path, doc.next_line - 1, doc.next_line - 1)
            content[mid] = text
        built.files[path] = doc.text()

    def gold_of(ids: Iterable[int]) -> tuple[Gold, ...]:
        return tuple(where[i] for i in dict.fromkeys(ids) if i in where)

    def messages_with(snippet: str) -> list[int]:
        needle = _one_line(snippet)
        return [mid for mid, text in content.items() if text.startswith(needle) or needle in text]

    candidates: list[tuple[str, str, str, tuple[Gold, ...]]] = []
    for n, change in enumerate(ground_truth.get("changes", []), 1):
        query = (
            f"Marcus's {change['query_topic']} changed from {change['old_value']} to {change['new_value']}"
        )
        candidates.append((f"cri-change-{n}", query, "change", gold_of(change.get("key_messages", []))))
    for n, conflict in enumerate(ground_truth.get("conflicts", []), 1):
        ids = conflict.get("introduced_at_messages", [])
        candidates.append((f"cri-conflict-{n}", conflict["correct_resolution"], "conflict", gold_of(ids)))
    for n, signal in enumerate(ground_truth.get("signal_examples", []), 1):
        ids = messages_with(signal["text"])
        candidates.append((f"cri-signal-{n}", signal["target_fact"], "signal", gold_of(ids)))
    built.queries = [Query(qid, q, cat, gold) for qid, q, cat, gold in candidates if gold]
    return built


# --- reading the installed sources, caching the built sets -------------------------------------


def read_gz_or_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def _need(path: Path, package: str) -> Path:
    if not path.exists():
        raise SourceMissingError(
            f"{path} is missing (Debian package {package})", hint=f"apt-get install -y {package}"
        )
    return path


def _debian_faq_sources() -> list[Path]:
    return [_need(DEBIAN_FAQ_FILE, "debian-faq")]


def _gitfaq_sources() -> list[Path]:
    base = _need(GIT_DOC_DIR / "gitfaq.txt", "git-doc").parent
    return [base / "gitfaq.txt", *(base / name for name in GIT_GUIDES if (base / name).is_file())]


def _man_sources() -> list[Path]:
    root = _need(MANPAGES_ZH_DIR, "manpages-zh")
    pages = []
    for path in sorted(p for section in MAN_SECTIONS for p in (root / section).glob("*")):
        if path.is_symlink() or not path.is_file() or path.name[:1].lower() not in MAN_LETTERS:
            continue
        if path.stat().st_size > MAN_MAX_BYTES:  # compressed size: checked again uncompressed
            continue
        pages.append(path)
    return pages


def cri_dataset_dir() -> Path:
    """The persona folder inside the installed ``cri`` package (located, never imported)."""
    spec = importlib.util.find_spec("cri")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "datasets" / CRI_PERSONA
        if (candidate / "conversations.jsonl").is_file():
            return candidate
    raise SourceMissingError(
        "the cri-benchmark package (its persona chat) is not installed",
        hint="pip install --no-deps cri-benchmark",
    )


def _cri_sources() -> list[Path]:
    folder = cri_dataset_dir()
    return [folder / "conversations.jsonl", folder / "ground_truth.json"]


def _build_debian_faq() -> BuiltSet:
    return build_debian_faq(read_gz_or_text(DEBIAN_FAQ_FILE))


def _build_gitfaq() -> BuiltSet:
    sources = _gitfaq_sources()
    return build_gitfaq(
        sources[0].read_text(encoding="utf-8"), {p.name: p.read_text(encoding="utf-8") for p in sources[1:]}
    )


def _build_manpages() -> BuiltSet:
    pages: dict[str, str] = {}
    for path in _man_sources():
        text = read_gz_or_text(path)
        if len(text.encode("utf-8")) <= MAN_MAX_BYTES:
            pages[f"{path.parent.name}/{path.name}"] = text
    return build_manpages_zh(pages)


def _dated_sources() -> list[Path]:
    here = Path(__file__).resolve().parent
    return [here / "dated.py", here / "dated_topics.py"]


def _today() -> str:
    return dt.date.today().isoformat()


def _crosslingual_sources() -> list[Path]:
    from evaluation.crosslingual import pair_sources

    return pair_sources()


def _build_crosslingual(name: str) -> Callable[[], BuiltSet]:
    def build() -> BuiltSet:
        from evaluation.crosslingual import build_from_disk

        return build_from_disk(name)

    return build


def _build_dated() -> BuiltSet:
    from evaluation.dated import build_dated

    return build_dated(dt.date.today())[0]


def _build_cri() -> BuiltSet:
    folder = cri_dataset_dir()
    lines = (folder / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    messages = [json.loads(line) for line in lines if line.strip()]
    truth = json.loads((folder / "ground_truth.json").read_text(encoding="utf-8"))
    return build_cri_journals(messages, truth)


@dataclass(frozen=True)
class SetSpec:
    """How to build one set: its source files (they decide when to rebuild) and the builder."""

    name: str
    language: str
    sources: Callable[[], list[Path]]
    build: Callable[[], BuiltSet]
    origin: str
    #: Anything besides the sources that decides the set (the date, for the dated journals).
    stamp: Callable[[], str] = str
    #: "store": the configuration rows of ``python -m evaluation``; "memsearch": the set is
    #: evaluated through ``MemSearch`` itself (``evaluation.dated_run``).
    runner: str = "store"


SETS: dict[str, SetSpec] = {
    spec.name: spec
    for spec in (
        SetSpec("debian-faq", "en", _debian_faq_sources, _build_debian_faq, "Debian package debian-faq"),
        SetSpec("gitfaq", "en", _gitfaq_sources, _build_gitfaq, "Debian package git-doc"),
        SetSpec("manpages-zh", "zh", _man_sources, _build_manpages, "Debian package manpages-zh"),
        SetSpec("cri-persona", "en", _cri_sources, _build_cri, "PyPI package cri-benchmark (MIT)"),
        SetSpec(
            "man-en2zh",
            "en→zh",
            _crosslingual_sources,
            _build_crosslingual("man-en2zh"),
            "Debian packages manpages-zh, manpages and the base system's English pages",
        ),
        SetSpec(
            "man-zh2en",
            "zh→en",
            _crosslingual_sources,
            _build_crosslingual("man-zh2en"),
            "Debian packages manpages-zh, manpages and the base system's English pages",
        ),
        SetSpec(
            "dated-journals",
            "en+zh",
            _dated_sources,
            _build_dated,
            "synthetic, evaluation/dated.py",
            stamp=_today,
            runner="memsearch",
        ),
    )
}

META_FILE = "meta.json"


def _fingerprint(paths: Iterable[Path], stamp: str = "") -> str:
    digest = hashlib.sha256(f"builder-{BUILDER_VERSION}\0{stamp}".encode())
    for path in paths:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def write_set(built: BuiltSet, root: Path, meta: dict[str, object]) -> None:
    """Write a built set to ``root`` (replacing what was there) via a temporary sibling folder."""
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, text in built.files.items():
        target = tmp / CORPUS_DIR / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (tmp / CORPUS_DIR).mkdir(parents=True, exist_ok=True)
    write_queries(tmp / QUERIES_FILE, built.queries)
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)


def ensure_set(name: str, cache_dir: Path) -> Dataset:
    """The set called ``name``, built into ``cache_dir/sets/<name>`` unless the cache is current."""
    spec = SETS[name]
    root = cache_dir / "sets" / name
    fingerprint = _fingerprint(spec.sources(), spec.stamp())
    meta_path = root / META_FILE
    try:
        current = json.loads(meta_path.read_text(encoding="utf-8")).get("fingerprint") == fingerprint
    except (OSError, ValueError):
        current = False
    if not current:
        built = spec.build()
        meta = {
            "fingerprint": fingerprint,
            "origin": spec.origin,
            "files": len(built.files),
            "queries": len(built.queries),
            "stamp": spec.stamp(),
        }
        write_set(built, root, meta)
    return load_dataset(root, name)
