"""Daily memory journals: writing one captured turn, finding duplicates, and previewing recent days.

This module owns the on-disk journal format the agent plugins share, so
every platform writes it the same way:

```
# 2026-03-25            (only for platforms that title their files, when the file is created)

## Session 15:24

### 15:24
<!-- session:<id> turn:<id> transcript:<path> -->
- User asked ...
- Claude Code did ...

```

Why it exists as one module: the original wrote this format from five code bases, with the UTC
date in some and the local date in others, no protection against two writers at once, and a
duplicate entry for every repeated Stop of the same turn. Here:

- the date of the file and the ``HH:MM`` stamps come from one local time;
- the check "is this session's heading the current one / is this turn already written" and the
  append happen under one exclusive lock on the day file, so concurrent writers (several sessions,
  a detached worker, ``memsearch compact``) never interleave or duplicate;
- a turn is a duplicate when an anchor with the same identifying fields (session and turn) already
  exists in that day file or the previous one (a Stop repeated across midnight);
- a session's turns are written under a ``## Session`` heading of that session: when another
  session wrote last, a new heading is started instead of mixing entries under the other session's
  heading.

Only the standard library is used, so hooks that write or preview journals start fast.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from memsearch.engine.project_files import MAX_JOURNAL_BYTES, read_project_text
from memsearch.files import exclusive, open_own, replaced

if TYPE_CHECKING:
    from memsearch.redact import Redactor

#: Anchor fields that name a conversation file (recorded by :mod:`memsearch.engine.written`).
TRANSCRIPT_FIELDS = ("transcript", "rollout", "db")

__all__ = [
    "AppendResult",
    "JournalEntry",
    "append_entry",
    "day_file",
    "find_duplicate",
    "format_anchor",
    "is_journal",
    "journal_files",
    "parse_anchor_fields",
    "preview_lines",
    "recent_days",
    "recent_memory",
    "render_days",
    "sanitize_bullet",
]

#: Daily journal file names; other markdown files in the memory folder are a person's notes.
DAY_FILE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")


def is_journal(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a daily journal (``YYYY-MM-DD.md``): memsearch's own format, which it
    may rewrite (``scan --redact``, ``forget``) and dates by its name."""
    return bool(DAY_FILE_RE.match(os.path.basename(path)))


_COMMENT_RE = re.compile(r"<!--(.*?)-->")
#: The most characters kept of one bullet; a runaway model line must not bloat the journal.
MAX_BULLET_CHARS = 2000


@dataclass(frozen=True)
class JournalEntry:
    """One captured turn.

    ``anchor`` holds the anchor comment's fields in order (``{"session": ..., "turn": ...,
    "transcript": ...}``); empty means no anchor. ``identity`` names the anchor fields that identify
    the turn: an existing anchor with the same values for all of them makes this entry a duplicate.
    An empty ``identity`` never deduplicates (a platform that cannot name its turns).
    """

    bullets: Sequence[str]
    anchor: Mapping[str, str] = field(default_factory=dict)
    identity: tuple[str, ...] = ()

    @property
    def session(self) -> str:
        return self.anchor.get("session", "")

    def key(self) -> dict[str, str] | None:
        """The identifying field values, or None when the entry cannot be deduplicated."""
        if not self.identity or not all(self.anchor.get(name) for name in self.identity):
            return None
        return {name: self.anchor[name] for name in self.identity}


@dataclass(frozen=True)
class AppendResult:
    """Where the entry went; ``written`` is False for a duplicate (``duplicate_in`` says where)."""

    path: Path
    written: bool
    duplicate_in: Path | None = None


# --- format -----------------------------------------------------------------------------------


def _anchor_value(value: str) -> str:
    """A value safe inside the one-line, space-separated anchor comment.

    Whitespace would split the value and ``-->`` would end the comment, so both are
    percent-encoded; everything else (non-ASCII paths included) is kept as written.
    """
    out = re.sub(r"\s", lambda m: f"%{ord(m.group()):02X}", value)
    return out.replace("-->", "--%3E")


def format_anchor(fields: Mapping[str, str]) -> str:
    """``<!-- session:a turn:b ... -->`` for the given fields, in their order ("" for none)."""
    if not fields:
        return ""
    body = " ".join(f"{name}:{_anchor_value(str(value))}" for name, value in fields.items())
    return f"<!-- {body} -->"


def parse_anchor_fields(line: str) -> dict[str, str] | None:
    """The ``key:value`` fields of the first anchor comment in ``line``, or None if there is none.

    Lenient on purpose (any identifier keys, any order): used for duplicate and session checks,
    where an anchor written by another platform or version must still be recognised.
    """
    for match in _COMMENT_RE.finditer(line):
        fields: dict[str, str] = {}
        for token in match.group(1).split():
            key, sep, value = token.partition(":")
            if not sep or not key.isidentifier():
                fields = {}
                break
            fields.setdefault(key, value)
        if fields:
            return fields
    return None


def sanitize_bullet(text: str) -> str:
    """One journal bullet: a single line starting with ``- ``, clipped, unable to forge an anchor.

    Text from a model or a user's message must never become a heading, an anchor comment or a
    second entry, so newlines are folded and ``<!--`` is escaped.
    """
    line = " ".join(text.split())
    if line.startswith(("- ", "* ", "• ")):
        line = line[2:].strip()
    elif line in ("-", "*", "•"):
        line = ""
    line = line.replace("<!--", "&lt;!--").replace("-->", "--&gt;")
    if len(line) > MAX_BULLET_CHARS:
        line = line[:MAX_BULLET_CHARS].rstrip() + " …"
    return f"- {line}" if line else ""


def day_file(memory_dir: str | os.PathLike[str], when: dt.datetime | dt.date) -> Path:
    """``<memory_dir>/YYYY-MM-DD.md`` for the local date of ``when``."""
    day = when.date() if isinstance(when, dt.datetime) else when
    return Path(memory_dir) / f"{day.isoformat()}.md"


def _matches(fields: Mapping[str, str], key: Mapping[str, str]) -> bool:
    return all(fields.get(name) == value for name, value in key.items())


def _has_anchor(text: str, key: Mapping[str, str]) -> bool:
    for line in text.splitlines():
        if "<!--" in line:
            fields = parse_anchor_fields(line)
            if fields is not None and _matches(fields, key):
                return True
    return False


def _read_text(path: Path, root: Path | None = None) -> str:
    """A journal's text, read as a project file (a regular file inside ``root``, by default its
    own folder: never a symbolic link, a FIFO or an oversize file); "" when it is not read."""
    return read_project_text(path, root if root is not None else path.parent, max_bytes=MAX_JOURNAL_BYTES)


def find_duplicate(
    memory_dir: str | os.PathLike[str], entry: JournalEntry, when: dt.datetime | None = None
) -> Path | None:
    """The day file (of ``when`` or the day before) that already holds this entry's turn, or None.

    A cheap check a hook can make before it pays for a summary; :func:`append_entry` checks again
    under the lock, so two racing writers still produce one entry.
    """
    key = entry.key()
    if key is None:
        return None
    when = when or dt.datetime.now()
    for day in (when.date(), when.date() - dt.timedelta(days=1)):
        path = day_file(memory_dir, day)
        if _has_anchor(_read_text(path), key):
            return path
    return None


def _current_section(text: str) -> tuple[str, set[str]]:
    """The file's last ``##`` heading line (``""`` for none), and the sessions under it."""
    lines = text.splitlines()
    start = None
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("## "):
            start = index
            break
    if start is None:
        return "", set()
    sessions = set()
    for line in lines[start + 1 :]:
        if "<!--" in line:
            fields = parse_anchor_fields(line)
            if fields and fields.get("session"):
                sessions.add(fields["session"])
    return lines[start].rstrip(), sessions


def _needs_heading(text: str, entry: JournalEntry, heading: str) -> bool:
    """Whether ``entry`` starts a new ``heading`` (``## Session HH:MM``): not when the current
    section is already this session's, nor when it is the same heading of no session (an entry
    without one, such as the MCP ``remember`` tool's, written in the same minute): two notes in one
    minute make one ``## Session HH:MM``, never two identical ones."""
    current, sessions = _current_section(text)
    if not current.startswith("## Session "):
        return True
    if entry.session:
        return entry.session not in sessions
    return current != heading or bool(sessions)


def append_entry(
    memory_dir: str | os.PathLike[str],
    entry: JournalEntry,
    *,
    when: dt.datetime | None = None,
    title: bool = False,
    redactor: Redactor | None = None,
) -> AppendResult:
    """Append one turn to the day file of ``when`` (default: now, local time).

    Writes ``### HH:MM``, the anchor comment, the bullets and a blank line, preceded by a
    ``## Session HH:MM`` heading unless the file's current section already belongs to this session.
    ``title`` adds ``# YYYY-MM-DD`` to a new file (the platforms that title their files); otherwise a
    new file starts with a blank line, as Claude Code's and Codex's journals always have.
    Nothing is written when the turn is already in this day file or the previous one.

    Every writer of a journal comes through here (each host's capture, the plain extract, the MCP
    ``remember`` tool), so this is where ``<private>`` spans and secrets are taken out
    (``redactor``, default: the configured one). An entry with nothing left after that is not
    written (``written`` False, no ``duplicate_in``).
    """
    when = when or dt.datetime.now()
    if not any(sanitize_bullet(line) for line in entry.bullets):
        raise ValueError("a journal entry needs at least one bullet")
    directory = Path(memory_dir)
    path = day_file(directory, when)
    if redactor is None:
        from memsearch import redact

        redactor = redact.current()
    # joined, so a private span or a key block that runs over several bullets is found whole (a
    # NUL keeps the bullets apart: a bullet may hold newlines, folded by sanitize_bullet)
    kept = redactor.text("\n\0".join(entry.bullets), "capture").split("\0")
    bullets = [b for b in (sanitize_bullet(line) for line in kept) if b]
    if not bullets:
        return AppendResult(path, False)
    directory.mkdir(parents=True, exist_ok=True)
    key = entry.key()
    if key is not None:
        previous = day_file(directory, when.date() - dt.timedelta(days=1))
        if _has_anchor(_read_text(previous), key):
            return AppendResult(path, False, previous)
    while True:
        # Never through a symbolic link a repository shipped under today's name, never into a FIFO.
        fd = open_own(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        with os.fdopen(fd, "a+b") as fh, exclusive(fh):
            if replaced(path, fh.fileno()):
                continue  # renamed over while we waited for the lock: write to the new file
            written_here = _write_entry(fh, entry, bullets, key, when, title, path)
            if written_here is not None:
                return written_here
            break
    from memsearch.engine import written

    written.record_transcripts(directory, [entry.anchor.get(name, "") for name in TRANSCRIPT_FIELDS])
    written.record_memory_folder(directory)
    return AppendResult(path, True)


def _write_entry(
    fh: BinaryIO,
    entry: JournalEntry,
    bullets: list[str],
    key: Mapping[str, str] | None,
    when: dt.datetime,
    title: bool,
    path: Path,
) -> AppendResult | None:
    """Append ``entry`` to the locked day file ``fh``; an AppendResult when it was already there."""
    fh.seek(0)
    text = fh.read().decode("utf-8", errors="replace")
    if key is not None and _has_anchor(text, key):
        return AppendResult(path, False, path)
    stamp = when.strftime("%H:%M")
    parts: list[str] = []
    if text and not text.endswith("\n"):
        parts.append("\n")  # a person's edit left no newline at the end
    if not text and title:
        parts.append(f"# {when.date().isoformat()}\n")
    heading = f"## Session {stamp}"
    if _needs_heading(text, entry, heading):
        parts.append(f"\n{heading}\n\n")
    anchor = format_anchor(entry.anchor)
    parts.append(f"### {stamp}\n" + (f"{anchor}\n" if anchor else "") + "\n".join(bullets) + "\n\n")
    fh.seek(0, os.SEEK_END)
    fh.write("".join(parts).encode("utf-8"))
    fh.flush()
    os.fsync(fh.fileno())
    return None


# --- reading recent memory --------------------------------------------------------------------


def journal_files(memory_dir: str | os.PathLike[str], count: int | None = None) -> list[Path]:
    """The daily journals in ``memory_dir``, newest first (by name), at most ``count``.

    Only names are listed (no file is opened), so a memory folder of thousands of days costs one
    directory read. Only regular files count: a symbolic link or a FIFO under a journal's name (a
    cloned repository can ship either) is not a journal.
    """
    try:
        with os.scandir(memory_dir) as it:
            names = [e.name for e in it if DAY_FILE_RE.match(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    names.sort(reverse=True)
    if count is not None:
        names = names[:count]
    return [Path(memory_dir) / name for name in names]


def preview_lines(text: str, max_lines: int = 40) -> list[str]:
    """The skeleton of one journal: ``##``/``###``/``####`` headings and ``- `` bullets.

    Lines are grouped into sections at each ``## `` heading; a section is kept only when it holds a
    bullet (stub headings are dropped), titles, anchors and prose are left out, and of what remains
    the last ``max_lines`` lines are returned (the newest part of the day).
    """
    kept: list[str] = []
    section: list[str] = []
    has_bullet = False

    def flush() -> None:
        if has_bullet:
            kept.extend(section)

    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("## "):
            flush()
            section, has_bullet = [line], False
        elif line.startswith(("### ", "#### ")):
            section.append(line)
        elif line.startswith("- "):
            section.append(line)
            has_bullet = True
    flush()
    return kept[-max_lines:] if max_lines > 0 else []


def recent_days(
    memory_dir: str | os.PathLike[str],
    *,
    files: int = 2,
    max_lines: int = 40,
    root: str | os.PathLike[str] | None = None,
) -> list[tuple[str, list[str]]]:
    """``(file name, preview lines)`` of the newest ``files`` journals (newest first) that have
    something to show. Only those few files are read, and only when they are regular files inside
    ``root`` (default: the memory folder); each is redacted whole before its lines are picked
    (:mod:`memsearch.exits`: a journal may come from anywhere)."""
    from memsearch import exits

    days: list[tuple[str, list[str]]] = []
    inside = Path(root) if root is not None else Path(memory_dir)
    for path in journal_files(memory_dir, files):
        lines = preview_lines(exits.out(_read_text(path, inside), "journal"), max_lines)
        if lines:
            days.append((path.name, lines))
    return days


def recent_memory(
    memory_dir: str | os.PathLike[str],
    *,
    files: int = 2,
    max_lines: int = 40,
    root: str | os.PathLike[str] | None = None,
) -> str:
    """A ``# Recent Memory`` block from the newest ``files`` journals (newest first), or "".

    Each journal contributes ``## <name>`` and its :func:`preview_lines` (:func:`recent_days`);
    journals with nothing to show are skipped.
    """
    return render_days(recent_days(memory_dir, files=files, max_lines=max_lines, root=root))


def render_days(days: list[tuple[str, list[str]]]) -> str:
    """The ``# Recent Memory`` block of :func:`recent_days` ("" when there are none)."""
    blocks = ["\n".join([f"## {name}", *lines]) for name, lines in days]
    if not blocks:
        return ""
    return "# Recent Memory\n\n" + "\n\n".join(blocks)
