"""Option sets shared by commands, and the one path from flags to a resolved configuration.

Flag names and their config keys live in one table (``memsearch.cli.flags.FLAG_KEYS``); this module
only declares the Click options and hands their values to the config layer. Commands then get their
memory from ``memsearch.engine.memory.open_memory``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from memsearch.config import MemSearchConfig

F = TypeVar("F", bound=Callable[..., Any])


def _apply(options: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    def decorator(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorator


#: Where the index lives: enough for read-only commands (stats, reset, expand).
store_options = _apply(
    [
        click.option("--collection", "-c", default=None, help="Milvus collection name."),
        click.option(
            "--default-collection",
            default=None,
            help="Collection to use when neither --collection nor a config file names one.",
        ),
        click.option(
            "--milvus-uri",
            default=None,
            help="Milvus URI: a local .db path (Milvus Lite) or http(s)://host:port.",
        ),
        click.option("--milvus-token", default=None, help="Milvus / Zilliz Cloud token."),
    ]
)

#: Embedding provider + store: for commands that embed (index, search, watch, compact).
common_options = _apply(
    [
        click.option(
            "--provider",
            "-p",
            default=None,
            help="Embedding provider (onnx, openai, ollama, google, voyage, jina, mistral, local, use).",
        ),
        click.option(
            "--model", "-m", default=None, help="Embedding model (default: the provider's default)."
        ),
        click.option(
            "--batch-size", type=int, default=None, help="Embedding batch size (0 = provider default)."
        ),
        click.option(
            "--base-url", default=None, help="Base URL of an OpenAI-compatible or self-hosted embedding API."
        ),
        click.option("--api-key", default=None, help="Embedding API key (or env:VAR)."),
        click.option(
            "--multilingual/--no-multilingual",
            default=None,
            help="The multilingual leg: a second vector per chunk, so a question finds notes in "
            "another language (embedding.multilingual; the multilingual extra).",
        ),
        store_options,
    ]
)

#: File selection, chunking and the collection's description, for commands that index folders
#: (index, watch).
indexing_options = _apply(
    [
        click.option(
            "--max-chunk-size",
            type=click.IntRange(min=1),
            default=None,
            help="Max chunk size in characters (must be >= 1).",
        ),
        click.option(
            "--description",
            default=None,
            help="Collection description (used when the collection is created).",
        ),
        click.option(
            "--ignore-file",
            "ignore_files",
            multiple=True,
            help="Ignore-file name to honour in each folder, e.g. .gitignore (repeatable).",
        ),
        click.option("--exclude", multiple=True, help="Extra gitignore-style pattern to skip (repeatable)."),
        click.option(
            "--no-follow-links",
            is_flag=True,
            help="Read no symbolic link: a file that is one, or that lies outside PATHS, is skipped "
            "and reported (the agent plugins index a project's memory folder so).",
        ),
    ]
)


#: Click parameter -> (flag, whether its value is a secret): the flags that pick a store, which a
#: follow-up command a command suggests must repeat (see :func:`store_flags`).
STORE_FLAGS: dict[str, tuple[str, bool]] = {
    "milvus_uri": ("--milvus-uri", False),
    "milvus_token": ("--milvus-token", True),
    "collection": ("--collection", False),
    "default_collection": ("--default-collection", False),
}


def store_flags(flags: Mapping[str, Any]) -> str:
    """The store flags this command was given, shell-quoted, each after a space ("" when none): a
    hint naming another command (``memsearch expand <hash>``, ``memsearch reset --yes``) must work
    when copied as printed, so it names the same store. The follow-up reads the same config files,
    so only flags repeat. A secret (``--milvus-token``) is repeated only as an ``env:`` reference."""
    import shlex

    parts = []
    for name, (flag, secret) in STORE_FLAGS.items():
        value = flags.get(name)
        if value is None or (secret and not str(value).startswith("env:")):
            continue
        parts.append(f" {flag} {shlex.quote(str(value))}")
    return "".join(parts)


def resolve(flags: dict[str, Any]) -> MemSearchConfig:
    """Config files + these flags (only the ones that were given) → resolved config."""
    from memsearch.cli.flags import config_from_flags

    return config_from_flags(flags)


def echo_json(data: Any) -> None:
    """JSON the way the original prints it: indent 2, non-ASCII kept."""
    import json

    click.echo(json.dumps(data, indent=2, ensure_ascii=False))
