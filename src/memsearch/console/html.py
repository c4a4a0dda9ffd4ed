"""HTML that is escaped by construction, and the frame every page shares.

Why not templates: a page is built from :func:`el` calls, where every string child and every
attribute value is escaped unless it is already :class:`Raw` (made only here, from escaped parts).
So memory text (a journal holding ``<script>`` or ``<img onerror=...>``) can only ever become
text on the page: there is no unescaped way to put a string in. The Content-Security-Policy
(``guard.HEADERS``: scripts only from the console's own file, no inline script) is the second
wall behind it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

__all__ = ["Raw", "el", "esc", "json_block", "link", "page", "url"]


class Raw(str):
    """Markup already escaped (only this module makes it)."""


def esc(value: Any) -> Raw:
    """``value`` as text in HTML (a :class:`Raw` stays as it is)."""
    if isinstance(value, Raw):
        return value
    return Raw(html.escape("" if value is None else str(value), quote=True))


def _children(children: Iterable[Any]) -> str:
    out: list[str] = []
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, (str, int, float)):
            out.append(esc(child))
        else:
            out.append(_children(child))
    return "".join(out)


_VOID = frozenset({"br", "hr", "img", "input", "meta", "link"})


def el(tag: str, *children: Any, **attrs: Any) -> Raw:
    """``<tag attrs>children</tag>``: ``class_`` for ``class``, ``data_x`` for ``data-x``; an
    attribute that is None or False is left out, True is written bare."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    opening = f"<{' '.join(parts)}>"
    if tag in _VOID:
        return Raw(opening)
    return Raw(f"{opening}{_children(children)}</{tag}>")


def url(page_path: str, /, **params: Any) -> str:
    """``page_path?params`` with the parameters that are set (None and "" left out)."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{page_path}?{urlencode(kept)}" if kept else page_path


def link(text: Any, page_path: str, /, **params: Any) -> Raw:
    return el("a", text, href=url(page_path, **params))


def json_block(element_id: str, data: Any) -> Raw:
    """Data for the page's script, as a ``<script type="application/json">`` block: never run
    (the policy allows no inline script, and this type is not a script to a browser), read with
    ``JSON.parse``; ``<``, ``>`` and ``&`` are written as escapes so no text can close it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Raw(f'<script type="application/json" id="{esc(element_id)}">{text}</script>')


#: The navigation: (path, label, access key).
NAV = (
    ("/", "Timeline", "t"),
    ("/search", "Search", "s"),
    ("/inbox", "Review", "r"),
    ("/activity", "What memory did", "a"),
)


def page(
    title: str,
    body: Any,
    *,
    active: str,
    project: Mapping[str, Any],
    projects: Sequence[Mapping[str, Any]],
    flash: tuple[bool, str] | None = None,
    badges: Mapping[str, int] | None = None,
    live: str = "",
    csrf: str = "",
) -> bytes:
    """A whole page: the header (navigation, project picker), the flash message of the last
    action, ``body``, and the console's stylesheet and script (both optional: every page reads
    without the script)."""
    key = str(project.get("key", ""))
    nav = el(
        "nav",
        el(
            "ul",
            [
                el(
                    "li",
                    el(
                        "a",
                        label,
                        f" ({badges[path]})" if badges and badges.get(path) else "",
                        href=url(path, p=key),
                        accesskey=access,
                        aria_current="page" if path == active else None,
                    ),
                )
                for path, label, access in NAV
            ],
        ),
        aria_label="Console",
    )
    picker = None
    if len(projects) > 1:
        picker = el(
            "form",
            el("label", "Project ", el("select", _options(projects, key), name="p", id="project-picker")),
            " ",
            el("button", "Show", type="submit"),
            method="get",
            action=active,
            class_="picker",
            id="project-form",
        )
    message = None
    if flash is not None:
        ok, text = flash
        message = el("p", text, class_="flash ok" if ok else "flash error", role="status")
    where = str(project.get("name", ""))
    document = el(
        "html",
        el(
            "head",
            Raw('<meta charset="utf-8">'),
            el("meta", name="viewport", content="width=device-width, initial-scale=1"),
            el("meta", name="color-scheme", content="light dark"),
            el("meta", name="csrf-token", content=csrf) if csrf else None,
            el("title", f"{title} · {where} · memsearch"),
            el("link", rel="icon", href="data:,"),  # no favicon request
            el("link", rel="stylesheet", href="/static/console.css"),
            el("script", src="/static/console.js", defer=True),
        ),
        el(
            "body",
            el("a", "Skip to content", href="#main", class_="skip"),
            el(
                "header",
                el("p", el("strong", "memsearch"), " ", el("span", where, class_="where"), class_="brand"),
                nav,
                picker,
            ),
            el("main", message, body, id="main", tabindex="-1", data_live=live or None, data_project=key),
        ),
        lang="en",
    )
    return f"<!doctype html>\n{document}\n".encode()


def _options(projects: Sequence[Mapping[str, Any]], key: str) -> Raw:
    return Raw("".join(el("option", p["label"], value=p["key"], selected=p["key"] == key) for p in projects))
