"""The settings tree: every setting's name, type and default, defined once, in dataclasses.

A dotted key such as ``chunking.max_chunk_size`` is a path through these dataclasses (TOML names:
``plugins.claude-code`` is the attribute ``claude_code``). Other modules that need a default (the
store's URI and collection, the facade's provider) take it from here. Also owns the lists that
are part of the schema: which keys a project file may set, which fields are secrets,
the allowed ranges of numbers, the ``MEMSEARCH_*`` variables that hold a yes/no or a number,
the plugin platforms and tasks, and where the deprecated ``[compact]`` keys moved.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from memsearch.config.env import resolve_env_ref
from memsearch.errors import ConfigKeyError

PROJECT_CONFIG_NAME = ".memsearch.toml"
DEFAULT_MILVUS_URI = "~/.memsearch/milvus.db"
#: A ``milvus.uri`` that starts so names a Milvus server; anything else is a Milvus Lite path,
#: which must end in :data:`LITE_SUFFIX` (Milvus Lite opens no other name).
SERVER_URI_PREFIXES: tuple[str, ...] = ("http://", "https://", "tcp://", "unix:")
LITE_SUFFIX = ".db"
#: What ``memsearch index`` may do with a hand-written note holding a secret (``redact.notes``).
REDACT_NOTES_MODES: tuple[str, ...] = ("redact", "warn", "skip")
DEFAULT_COLLECTION = "memsearch_chunks"
DEFAULT_PROVIDER = "onnx"
#: Hits each leg of a hybrid search fetches before fusion, whatever ``top_k`` is (``search.candidates``;
#: the measurements behind it are in docs/architecture.md#ranking).
DEFAULT_CANDIDATES = 30
#: The strong-match floor: the least ``relevance`` a hit needs to be handed to a model or proposed
#: by ``forget --query`` (``search.min_relevance``; calibrated in evaluation/README.md#relevance).
DEFAULT_MIN_RELEVANCE = 0.7

#: The only keys a project file may set. A ``.memsearch.toml`` comes with whatever repository was
#: cloned, so it must not be able to redirect the index (URIs, tokens), leak code to an endpoint of its
#: choosing (providers, base URLs, keys), or change what runs (LLM, prompts, plugins).
PROJECT_ALLOWED_KEYS: tuple[str, ...] = (
    "milvus.collection",
    "embedding.batch_size",
    "chunking.max_chunk_size",
    "chunking.overlap_lines",
    "indexing.ignore_files",
    "indexing.exclude",
    "watch.debounce_ms",
    "search.recency_half_life",  # a ranking preference: redirects, leaks and runs nothing
)

#: Field names whose values are secrets wherever they appear (``embedding.api_key``,
#: ``llm.providers.<name>.api_key``, ``milvus.token``, ...).
SECRET_FIELDS: frozenset[str] = frozenset({"api_key", "token"})

PLUGIN_PLATFORMS: tuple[str, ...] = ("claude-code", "codex", "opencode", "openclaw", "dsh")
PLUGIN_TASKS: tuple[str, ...] = ("summarize", "project_review", "user_profile", "memory_to_skill")

#: Suggested model per LLM backend (what an empty ``llm.model`` means for that backend).
LLM_DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-5-mini",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-3-flash-preview",
}

#: Where each deprecated ``[compact]`` key moved to.
COMPACT_KEY_MOVES: dict[str, str] = {
    "llm_provider": "llm.provider",
    "llm_model": "llm.model",
    "prompt_file": "prompts.compact",
    "base_url": "llm.base_url",
    "api_key": "llm.api_key",
}

#: Allowed range (lowest, highest) of each number a person can set: settings by field name (the
#: names are unique across the tree) and environment variables by their own name. Every number must
#: also be finite. The upper bounds keep a typo or a hostile project file from reaching a value that
#: breaks a deadline or a thread (``threading`` refuses waits beyond ~292 years, sockets beyond that).
RANGES: dict[str, tuple[float, float]] = {
    "max_chunk_size": (1, 1_000_000),
    "overlap_lines": (0, 10_000),
    "batch_size": (0, 100_000),
    "debounce_ms": (0, 3_600_000),  # one hour
    "lock_timeout": (0, 86_400),  # one day
    "timeout": (0, 86_400),
    "min_interval_hours": (0, 87_600),  # ten years
    "min_occurrences": (1, 1_000_000),
    "top_k": (1, 1_000),
    "recency_half_life": (0, 36_500),  # a hundred years
    "candidates": (1, 1_000),  # the store's cap on one leg's hits
    "min_relevance": (0, 1),
    "idle_timeout": (1, 31_536_000),  # one year
    "max_on_demand": (1, 1_000),
    "session_start_tokens": (100, 1_000_000),
    "prompt_hint_tokens": (50, 1_000_000),
    "recall_tokens": (200, 1_000_000),
    "MEMSEARCH_SERVICE_TIMEOUT": (0.01, 86_400),
    "MEMSEARCH_MODEL_IDLE_SECONDS": (0.1, 31_536_000),
    "MEMSEARCH_SUMMARY_MAX_CHARS": (0, 100_000_000),
    "MEMSEARCH_OPENCODE_TAIL_QUIET_MS": (0, 3_600_000),
}


class EnvVariable(NamedTuple):
    """A ``MEMSEARCH_*`` variable holding a yes/no or a number (read by :mod:`.envvars`)."""

    type: type
    #: The :data:`RANGES` entry of a number: the setting it overrides, or the variable itself.
    range: str = ""


#: Every ``MEMSEARCH_*`` variable that holds a yes/no or a number. Paths and URLs are not here:
#: they are text, checked where used.
ENV_VARIABLES: dict[str, EnvVariable] = {
    "MEMSEARCH_NO_SERVICE": EnvVariable(bool),
    "MEMSEARCH_SERVICE_AUTOSTART": EnvVariable(bool),
    "MEMSEARCH_SERVICE_TIMEOUT": EnvVariable(float, "MEMSEARCH_SERVICE_TIMEOUT"),
    "MEMSEARCH_SERVICE_IDLE_TIMEOUT": EnvVariable(float, "idle_timeout"),
    "MEMSEARCH_SERVICE_MAX_ON_DEMAND": EnvVariable(int, "max_on_demand"),
    "MEMSEARCH_MODEL_IDLE_SECONDS": EnvVariable(float, "MEMSEARCH_MODEL_IDLE_SECONDS"),
    "MEMSEARCH_ONNX_CACHE": EnvVariable(bool),
    "MEMSEARCH_DISABLE": EnvVariable(bool),
    "MEMSEARCH_NO_WATCH": EnvVariable(bool),
    "MEMSEARCH_HOOK_SYNC": EnvVariable(bool),
    "MEMSEARCH_CODEX_NO_TRUST": EnvVariable(bool),
    "MEMSEARCH_SUMMARY_MAX_CHARS": EnvVariable(int, "MEMSEARCH_SUMMARY_MAX_CHARS"),
    "MEMSEARCH_OPENCODE_TAIL_QUIET_MS": EnvVariable(int, "MEMSEARCH_OPENCODE_TAIL_QUIET_MS"),
    "MEMSEARCH_REDACT": EnvVariable(bool),
    "MEMSEARCH_RECALL_LOG": EnvVariable(bool),
}


@dataclass
class MilvusConfig:
    """Where the index lives. ``uri`` is a Milvus Lite path or an ``http(s)://`` server URI."""

    uri: str = DEFAULT_MILVUS_URI
    token: str = ""
    collection: str = DEFAULT_COLLECTION
    #: Seconds a direct open waits for a Milvus Lite database another process holds.
    lock_timeout: float = 10.0


@dataclass
class EmbeddingConfig:
    """Which embedding provider and model. ``model == ""`` means the provider's default."""

    provider: str = DEFAULT_PROVIDER
    model: str = ""
    batch_size: int = 0
    base_url: str = ""
    api_key: str = ""
    #: Total deadline of one request to a remote embedding API, seconds (0: the provider's default,
    #: 60 s; 300 s for Ollama, whose first request loads the model).
    timeout: float = 0
    #: A second vector per chunk from the multilingual model (the ``use`` provider, the
    #: ``multilingual`` extra), searched as a third leg: questions find notes in another language.
    multilingual: bool = False


@dataclass
class CompactConfig:
    """Deprecated ``[compact]`` section; kept so old files load. See :data:`COMPACT_KEY_MOVES`."""

    llm_provider: str = "openai"
    llm_model: str = ""
    prompt_file: str = ""
    base_url: str = ""
    api_key: str = ""


@dataclass
class ChunkingConfig:
    max_chunk_size: int = 1500
    overlap_lines: int = 2


@dataclass
class IndexingConfig:
    """Opt-in ignore rules: ``ignore_files`` are gitignore-style files, ``exclude`` glob patterns."""

    ignore_files: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)


@dataclass
class WatchConfig:
    debounce_ms: int = 1500


@dataclass
class ServiceConfig:
    """The memory service started on demand by the CLI's read commands and the agent hooks."""

    #: Start one when none runs for the store (``MEMSEARCH_SERVICE_AUTOSTART=0`` turns it off too).
    autostart: bool = True
    #: Seconds without a request after which a service started on demand exits
    #: (``MEMSEARCH_SERVICE_IDLE_TIMEOUT`` overrides it).
    idle_timeout: float = 300.0
    #: Services started on demand that may run at once (per user); starting one more first stops
    #: the least recently used (``MEMSEARCH_SERVICE_MAX_ON_DEMAND`` overrides it).
    max_on_demand: int = 3


@dataclass
class RerankerConfig:
    """Cross-encoder reranker; an empty ``model`` disables reranking."""

    model: str = ""


@dataclass
class SearchConfig:
    """How ``search`` ranks: ``recency_half_life`` (days; 0 = off) multiplies each fused score by
    ``0.5 ** (age / half_life)`` (``memsearch.engine.time_search``); ``candidates`` is how many hits
    each leg fetches before fusion, whatever the number of results (``top_k`` when larger);
    ``min_relevance`` is the strong-match floor below which a hit is not handed to a model (MCP
    ``search``, the prompt auto-inject, the recall skills' searches) nor proposed by ``forget
    --query`` (which never goes below the default). Not settable by a project file: a cloned
    repository could silence recall (1.0) or make ``forget --query`` take a weak match (0.0)."""

    recency_half_life: float = 0.0
    candidates: int = DEFAULT_CANDIDATES
    min_relevance: float = DEFAULT_MIN_RELEVANCE


@dataclass
class LLMProviderConfig:
    """A named LLM endpoint (``[llm.providers.<name>]``). Values may stay ``env:VAR`` until used."""

    type: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""

    def resolved(self, name: str = "<name>") -> LLMProviderConfig:
        """A copy with ``env:`` references replaced — call this only when the provider is used."""
        return LLMProviderConfig(
            **{
                f.name: resolve_env_ref(getattr(self, f.name), key=f"llm.providers.{name}.{f.name}")
                for f in fields(self)
            }
        )


@dataclass
class LLMConfig:
    """The LLM used by ``compact``, plus named providers that plugins route summaries to."""

    provider: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    providers: dict[str, LLMProviderConfig] = field(default_factory=dict)


@dataclass
class PromptsConfig:
    """Paths to custom prompt templates; empty means the built-in prompt."""

    compact: str = ""
    summarize: str = ""
    project_review: str = ""
    user_profile: str = ""
    memory_to_skill: str = ""


@dataclass
class PluginSummarizeConfig:
    """Per-turn summaries. ``provider`` empty or ``native`` means the host agent summarises."""

    enabled: bool = True
    provider: str = ""
    model: str = ""


@dataclass
class PluginMaintenanceTaskConfig:
    """A periodic background task that writes one markdown file from the memory folder."""

    enabled: bool = False
    provider: str = "native"
    model: str = ""
    min_interval_hours: int = 24
    input_dir: str = ".memsearch/memory"
    output_file: str = ""


@dataclass
class PluginMemoryToSkillConfig:
    enabled: bool = False
    provider: str = "native"
    model: str = ""
    min_interval_hours: int = 24
    input_dir: str = ".memsearch/memory"
    min_occurrences: int = 3
    paths: list[str] = field(default_factory=list)


@dataclass
class PluginRecallConfig:
    """Recall on each prompt (``[plugins.<platform>.prompt_recall]``). ``auto_inject`` adds the
    ``top_k`` best search hits for the prompt to the model's context (off by default: the one-line
    hint to use the memory-recall skill costs fewer tokens)."""

    auto_inject: bool = False
    top_k: int = 3


@dataclass
class PluginPlatformConfig:
    summarize: PluginSummarizeConfig = field(default_factory=PluginSummarizeConfig)
    prompt_recall: PluginRecallConfig = field(default_factory=PluginRecallConfig)
    project_review: PluginMaintenanceTaskConfig = field(
        default_factory=lambda: PluginMaintenanceTaskConfig(output_file=".memsearch/PROJECT.md")
    )
    user_profile: PluginMaintenanceTaskConfig = field(
        default_factory=lambda: PluginMaintenanceTaskConfig(output_file=".memsearch/USER.md")
    )
    memory_to_skill: PluginMemoryToSkillConfig = field(default_factory=PluginMemoryToSkillConfig)


@dataclass
class PluginsConfig:
    """Per-platform plugin settings. TOML uses ``claude-code`` (``claude_code`` is accepted too)."""

    claude_code: PluginPlatformConfig = field(
        default_factory=PluginPlatformConfig, metadata={"toml": "claude-code"}
    )
    codex: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    opencode: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    openclaw: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)
    dsh: PluginPlatformConfig = field(default_factory=PluginPlatformConfig)

    def platform(self, name: str) -> PluginPlatformConfig:
        """The settings of one platform by its TOML or Python name; unknown names list the valid ones."""
        attr = name.replace("-", "_")
        if name.replace("_", "-") not in PLUGIN_PLATFORMS:
            raise ConfigKeyError(
                f"Unknown plugin platform: {name}", hint=f"Valid platforms: {', '.join(PLUGIN_PLATFORMS)}"
            )
        value: PluginPlatformConfig = getattr(self, attr)
        return value


@dataclass
class RedactConfig:
    """Privacy (``memsearch.redact``): ``<private>`` spans and secrets are taken out of what is
    written, embedded or sent. ``notes`` is what ``index`` does with a hand-written note holding a
    secret (``redact``, ``warn``: index as is, ``skip``: leave the file out); ``patterns`` are extra
    ``"kind=regex"`` detectors; ``allow`` lists values never redacted. Not settable by a project file."""

    enabled: bool = True
    notes: str = "redact"
    patterns: list[str] = field(default_factory=list)
    allow: list[str] = field(default_factory=list)


@dataclass
class ContextConfig:
    """Token budgets of what memsearch hands a model (``memsearch.agent.context_budget``): the
    session-start context, the per-prompt hint (with auto-injected hits), and the output of
    ``memsearch search`` / ``expand`` that the recall skills read. Over budget, the oldest or
    lowest-ranked parts are left out and one line says so."""

    session_start_tokens: int = 1200
    prompt_hint_tokens: int = 800
    recall_tokens: int = 2000


@dataclass
class TelemetryConfig:
    """The local recall log (``memsearch.agent.recall_log``): what memory injected and what the model
    searched, per session, for ``memsearch stats --recall``. Never sent anywhere."""

    recall: bool = True


@dataclass
class ConfigOrigin:
    """Where a resolved config came from. Not a setting: never serialised or merged."""

    global_path: Path | None = None
    project_path: Path | None = None
    #: Dotted keys present in the project file but dropped by the allowlist (or unknown).
    ignored_project_keys: list[str] = field(default_factory=list)
    #: ``embedding.model`` was set nowhere and holds the provider's default: the user did not choose
    #: it, so a store the original memsearch built may keep the original's model (memsearch.engine.migration).
    default_embedding_model: bool = False


@dataclass
class MemSearchConfig:
    milvus: MilvusConfig = field(default_factory=MilvusConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    compact: CompactConfig = field(default_factory=CompactConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    indexing: IndexingConfig = field(default_factory=IndexingConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    redact: RedactConfig = field(default_factory=RedactConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    origin: ConfigOrigin = field(
        default_factory=ConfigOrigin, repr=False, compare=False, metadata={"internal": True}
    )


@cache
def table_schema(cls: type) -> dict[str, tuple[str, Any]]:
    """TOML key -> (attribute name, resolved type) for a settings dataclass."""
    hints = typing.get_type_hints(cls)
    return {
        f.metadata.get("toml", f.name): (f.name, hints[f.name])
        for f in fields(cls)
        if not f.metadata.get("internal")
    }


@cache
def table_aliases(cls: type) -> dict[str, str]:
    """Accepted alternative TOML keys (the Python attribute name) -> canonical TOML key."""
    return {attr: key for key, (attr, _tp) in table_schema(cls).items() if attr != key}


SECTIONS: tuple[str, ...] = tuple(table_schema(MemSearchConfig))


def is_table(tp: Any) -> bool:
    return isinstance(tp, type) and is_dataclass(tp)


def is_mapping(tp: Any) -> bool:
    return typing.get_origin(tp) is dict


def config_kwargs(cfg: MemSearchConfig) -> dict[str, Any]:
    """The one place where configuration becomes ``MemSearch`` arguments.

    Plain JSON-able values, so the CLI can also send them to the memory service.
    """
    return {
        "embedding_provider": cfg.embedding.provider,
        # None = not chosen (the provider's default), which MemSearch tells from a chosen model
        "embedding_model": None if cfg.origin.default_embedding_model else cfg.embedding.model or None,
        "embedding_batch_size": cfg.embedding.batch_size,
        "embedding_base_url": cfg.embedding.base_url or None,
        "embedding_api_key": cfg.embedding.api_key or None,
        "embedding_timeout": cfg.embedding.timeout,
        "multilingual": cfg.embedding.multilingual,
        "milvus_uri": cfg.milvus.uri,
        "milvus_token": cfg.milvus.token or None,
        "collection": cfg.milvus.collection,
        "max_chunk_size": cfg.chunking.max_chunk_size,
        "overlap_lines": cfg.chunking.overlap_lines,
        "ignore_files": list(cfg.indexing.ignore_files),
        "exclude": list(cfg.indexing.exclude),
        "reranker_model": cfg.reranker.model,
        "search_candidates": cfg.search.candidates,
        "lock_timeout": cfg.milvus.lock_timeout,
    }
