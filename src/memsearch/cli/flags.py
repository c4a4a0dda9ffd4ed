"""The Click flag table: which command-line flag sets which config key, and flags -> resolved config.

The CLI's side of configuration. The config package knows nothing of flags: it takes a nested
override dict (``resolve_config(overrides)``), and this module builds that dict from a command's
Click parameters. A flag set on the command line beats every file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memsearch.config import MemSearchConfig, resolve_config
from memsearch.config.tables import set_path

__all__ = ["DEFAULT_FLAG_KEYS", "FLAG_KEYS", "config_from_flags", "merge_list_flags", "overrides_from_flags"]

#: Click parameter name -> dotted config key. The one place a flag gets its meaning;
#: a flag set on the command line always beats every file.
FLAG_KEYS: dict[str, str] = {
    "provider": "embedding.provider",
    "model": "embedding.model",
    "batch_size": "embedding.batch_size",
    "base_url": "embedding.base_url",
    "api_key": "embedding.api_key",
    "multilingual": "embedding.multilingual",
    "collection": "milvus.collection",
    "milvus_uri": "milvus.uri",
    "milvus_token": "milvus.token",
    "llm_provider": "llm.provider",
    "llm_model": "llm.model",
    "llm_base_url": "llm.base_url",
    "llm_api_key": "llm.api_key",
    "prompt_file": "prompts.compact",
    "max_chunk_size": "chunking.max_chunk_size",
    "debounce_ms": "watch.debounce_ms",
    "reranker_model": "reranker.model",
    "recency_half_life": "search.recency_half_life",
}


#: Click parameter name -> dotted config key, for flags that only supply a default: any config file
#: and the matching plain flag beat them (``--default-collection`` yields to ``milvus.collection``
#: in a file and to ``--collection``), as in the original, whose plugins pass it on every call.
DEFAULT_FLAG_KEYS: dict[str, str] = {
    "default_collection": "milvus.collection",
}


def overrides_from_flags(flags: Mapping[str, Any], table: Mapping[str, str] = FLAG_KEYS) -> dict[str, Any]:
    """The nested override dict for :func:`resolve_config` from a command's Click parameters.

    Names not in ``table`` (default :data:`FLAG_KEYS`) are ignored (so a command can pass all its
    parameters) and ``None`` means the flag was not given. ``ignore_files``/``exclude`` extend lists
    rather than replace them; see :func:`merge_list_flags`.
    """
    overrides: dict[str, Any] = {}
    for name, value in flags.items():
        key = table.get(name)
        if key is not None and value is not None:
            set_path(overrides, key.split("."), value)
    return overrides


def merge_list_flags(
    cfg: MemSearchConfig, ignore_files: Iterable[str] = (), exclude: Iterable[str] = ()
) -> MemSearchConfig:
    """Append ``--ignore-file``/``--exclude`` values to the configured lists (config first, no
    duplicates, order kept). Updates ``cfg`` in place and returns it."""
    cfg.indexing.ignore_files = list(dict.fromkeys([*cfg.indexing.ignore_files, *ignore_files]))
    cfg.indexing.exclude = list(dict.fromkeys([*cfg.indexing.exclude, *exclude]))
    return cfg


def config_from_flags(flags: Mapping[str, Any], *, cwd: Path | None = None) -> MemSearchConfig:
    """Resolve the config for a command: its flags as overrides, then the list flags appended."""
    cfg = resolve_config(
        overrides_from_flags(flags), defaults=overrides_from_flags(flags, DEFAULT_FLAG_KEYS), cwd=cwd
    )
    return merge_list_flags(cfg, flags.get("ignore_files") or (), flags.get("exclude") or ())
