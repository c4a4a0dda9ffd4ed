"""Configuration: the typed settings tree, layered loading, ``env:`` references, and get/set.

This package owns every memsearch setting: its name (a dotted key such as ``chunking.max_chunk_size``),
its type and default (the dataclasses of :mod:`.schema`), where it can come from, and how a value typed by a
person (``memsearch config set``, an environment variable) becomes the right type.

Layers, lowest to highest (``resolve_config``):

1. dataclass defaults;
2. the global file ``~/.memsearch/config.toml``;
3. the project file ``.memsearch.toml`` — the nearest one in the working directory or its parents,
   never above the repository root (the first directory holding ``.git``) or the home directory. It
   usually arrives with a cloned repository, so it is untrusted: only :data:`PROJECT_ALLOWED_KEYS`
   are taken from it, everything else is dropped and recorded in ``cfg.origin``;
4. overrides (CLI flags, through ``memsearch.cli.flags.FLAG_KEYS``).

Then ``env:VAR`` strings are replaced by environment variables (except under ``llm.providers``, which
are resolved only when that provider is used, so an unused provider with an unset variable breaks
nothing) and every value is converted to its field's type. Files are validated as they are read, so
a wrong type names the file, the key and the expected type; unknown keys are logged and ignored.

Only the standard library is imported at module level (TOML parsing and writing are imported when a
file is read or written), so every command can afford to read its configuration.

The package is split along those parts; this module re-exports their public names, so
``from memsearch.config import ...`` keeps working:

- :mod:`~memsearch.config.schema`: the dataclasses and every default, the allowlist, secrets, bounds;
- :mod:`~memsearch.config.checking`: type checking of file values, coercion of typed text;
- :mod:`~memsearch.config.files`: where the files are, TOML read/write, the project-file search;
- :mod:`~memsearch.config.resolve`: the layers merged and ``resolve_config``;
- :mod:`~memsearch.config.edit`: ``config get``/``config set`` and secret masking;
- :mod:`~memsearch.config.env` (``env:`` references) and :mod:`~memsearch.config.tables` (nested
  dicts: merge, dotted paths).

The CLI's flag table lives on the CLI side, in ``memsearch.cli.flags``.
"""

from memsearch.config.edit import (
    MASK,
    get_config_value,
    is_secret_key,
    lookup_key,
    mask_secrets,
    mask_value,
    parse_value,
    set_config_value,
)
from memsearch.config.env import (
    resolve_env_ref,
)
from memsearch.config.files import (
    filter_project_config,
    find_project_config,
    global_config_path,
    load_config_file,
    memsearch_home,
    project_config_target,
    save_config,
    update_config_file,
)
from memsearch.config.resolve import (
    config_to_dict,
    default_model_for,
    merged_file_config,
    resolve_config,
)
from memsearch.config.schema import (
    COMPACT_KEY_MOVES,
    DEFAULT_COLLECTION,
    DEFAULT_MILVUS_URI,
    DEFAULT_PROVIDER,
    LLM_DEFAULT_MODELS,
    PLUGIN_PLATFORMS,
    PLUGIN_TASKS,
    PROJECT_ALLOWED_KEYS,
    PROJECT_CONFIG_NAME,
    SECRET_FIELDS,
    SECTIONS,
    ChunkingConfig,
    CompactConfig,
    ConfigOrigin,
    EmbeddingConfig,
    IndexingConfig,
    LLMConfig,
    LLMProviderConfig,
    MemSearchConfig,
    MilvusConfig,
    PluginMaintenanceTaskConfig,
    PluginMemoryToSkillConfig,
    PluginPlatformConfig,
    PluginRecallConfig,
    PluginsConfig,
    PluginSummarizeConfig,
    PromptsConfig,
    RerankerConfig,
    SearchConfig,
    ServiceConfig,
    WatchConfig,
)
from memsearch.config.tables import (
    deep_merge,
    set_path,
)

__all__ = [
    "COMPACT_KEY_MOVES",
    "DEFAULT_COLLECTION",
    "DEFAULT_MILVUS_URI",
    "DEFAULT_PROVIDER",
    "LLM_DEFAULT_MODELS",
    "MASK",
    "PLUGIN_PLATFORMS",
    "PLUGIN_TASKS",
    "PROJECT_ALLOWED_KEYS",
    "PROJECT_CONFIG_NAME",
    "SECRET_FIELDS",
    "SECTIONS",
    "ChunkingConfig",
    "CompactConfig",
    "ConfigOrigin",
    "EmbeddingConfig",
    "IndexingConfig",
    "LLMConfig",
    "LLMProviderConfig",
    "MemSearchConfig",
    "MilvusConfig",
    "PluginMaintenanceTaskConfig",
    "PluginMemoryToSkillConfig",
    "PluginPlatformConfig",
    "PluginRecallConfig",
    "PluginSummarizeConfig",
    "PluginsConfig",
    "PromptsConfig",
    "RerankerConfig",
    "SearchConfig",
    "ServiceConfig",
    "WatchConfig",
    "config_to_dict",
    "deep_merge",
    "default_model_for",
    "filter_project_config",
    "find_project_config",
    "get_config_value",
    "global_config_path",
    "is_secret_key",
    "load_config_file",
    "lookup_key",
    "mask_secrets",
    "mask_value",
    "memsearch_home",
    "merged_file_config",
    "parse_value",
    "project_config_target",
    "resolve_config",
    "resolve_env_ref",
    "save_config",
    "set_config_value",
    "set_path",
    "update_config_file",
]
