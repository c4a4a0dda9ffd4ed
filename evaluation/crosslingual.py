"""The cross-lingual sets: a man page's NAME line in one language must find the page in the other.

Many man pages exist twice on a Debian system: in English (from the package that ships the
command, or ``manpages`` / ``manpages-dev``) and in Chinese (``manpages-zh``). Their NAME lines
say the same thing in two languages ("copy files and directories", "复制文件和目录"), which gives
known answers across languages with no translation of our own:

- ``man-en2zh``: the query is the English NAME description, the corpus the Chinese pages;
- ``man-zh2en``: the query is the Chinese NAME description, the corpus the English pages.

Both sets use the same pages: those present in both languages as regular files (not links),
man(7) pages (the converter of :mod:`evaluation.builders`), at most ``MAN_MAX_BYTES`` of troff
on both sides. The NAME line leaves the indexed page, as in ``manpages-zh``; the gold is the
whole page. The functions here are pure; the file reading is in :func:`pair_sources` and
:func:`build_from_disk`.
"""

from __future__ import annotations

from pathlib import Path

from evaluation.builders import (
    CJK_RE,
    MAN_MAX_BYTES,
    MANPAGES_ZH_DIR,
    BuiltSet,
    Gold,
    Query,
    SourceMissingError,
    parse_man_page,
    read_gz_or_text,
)

EN_MAN_DIR = Path("/usr/share/man")
#: set name -> (language of the queries, language of the corpus).
DIRECTIONS = {"man-en2zh": ("en", "zh"), "man-zh2en": ("zh", "en")}


def _usable_description(text: str | None, language: str) -> bool:
    """A NAME description that is in ``language``: Chinese ones hold Han characters, English
    ones none (an untranslated Chinese page repeats the English line)."""
    if not text:
        return False
    return bool(CJK_RE.search(text)) == (language == "zh")


def build_crosslingual(pairs: dict[str, dict[str, str]], name: str) -> BuiltSet:
    """The set ``name`` (a key of :data:`DIRECTIONS`) from ``pairs``: relative path
    (``man1/cp.1.gz``) -> {"en": troff, "zh": troff}.

    A pair takes part when both pages convert; its page in the corpus language enters the corpus,
    and its description in the query language becomes a query when usable. Pages that share one
    description are all gold for it."""
    asked, answered = DIRECTIONS[name]
    built = BuiltSet()
    by_description: dict[str, list[Gold]] = {}
    categories: dict[str, str] = {}
    for rel, sources in sorted(pairs.items()):
        pages = {lang: parse_man_page(sources[lang]) for lang in ("en", "zh")}
        doc, query = pages[answered], pages[asked]
        if doc is None or query is None or len(doc.lines) < 3:
            continue
        path = rel.removesuffix(".gz") + ".md"
        built.files[path] = "\n".join(doc.lines) + "\n"
        if _usable_description(query.description, asked) and query.description:
            by_description.setdefault(query.description, []).append(Gold(path, 1, len(doc.lines)))
            categories.setdefault(query.description, Path(rel).parent.name)
    ordered = sorted(by_description.items(), key=lambda kv: kv[1][0].path)
    for n, (description, gold) in enumerate(ordered, 1):
        built.queries.append(Query(f"{name}-{n}", description, categories[description], tuple(gold)))
    return built


def page_pairs() -> dict[str, tuple[Path, Path]]:
    """Relative path -> (English file, Chinese file) for every page installed in both languages
    as a regular file no larger than ``MAN_MAX_BYTES`` compressed (checked again uncompressed)."""
    if not MANPAGES_ZH_DIR.is_dir():
        raise SourceMissingError(
            f"{MANPAGES_ZH_DIR} is missing (Debian package manpages-zh)",
            hint="apt-get install -y manpages-zh",
        )
    pairs: dict[str, tuple[Path, Path]] = {}
    for zh in sorted(MANPAGES_ZH_DIR.glob("man*/*")):
        rel = f"{zh.parent.name}/{zh.name}"
        en = EN_MAN_DIR / rel
        if not (en.is_file() and zh.is_file()) or en.is_symlink() or zh.is_symlink():
            continue
        if max(en.stat().st_size, zh.stat().st_size) <= MAN_MAX_BYTES:
            pairs[rel] = (en, zh)
    if not pairs:
        raise SourceMissingError(
            "no man page is installed both in English and in Chinese",
            hint="apt-get install -y manpages manpages-dev manpages-zh",
        )
    return pairs


def pair_sources() -> list[Path]:
    """Every file the two sets read (they decide when the sets are rebuilt)."""
    return [path for pair in page_pairs().values() for path in pair]


def build_from_disk(name: str) -> BuiltSet:
    """The set ``name`` from the installed pages."""
    pairs: dict[str, dict[str, str]] = {}
    for rel, (en, zh) in page_pairs().items():
        texts = {"en": read_gz_or_text(en), "zh": read_gz_or_text(zh)}
        if all(len(text.encode("utf-8")) <= MAN_MAX_BYTES for text in texts.values()):
            pairs[rel] = texts
    return build_crosslingual(pairs, name)
