"""The ``memsearch config init`` wizard: its questions, section by section, and the answers as updates.

Why sections: the global file has ~45 settings a person may want to answer (15 of them plugin
summaries alone), and most people change two or three. Each section first shows what it holds now
and asks once whether to change it; Enter keeps the whole section as it is (nothing of it is
written), ``y`` asks its questions. The sections are one table (:data:`GLOBAL_SECTIONS`), so the
order, the headers and the one-answer skip cannot drift apart. Answers are checked like
``config set`` values (a bad one is asked again), so the wizard never writes what a command
cannot use. A project file has five keys: its wizard asks them all.

The wizard starts from the *unresolved* files, so an ``env:`` reference is offered and written
back as written, never as its value; a secret is shown masked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from memsearch.config import (
    LLM_DEFAULT_MODELS,
    PLUGIN_PLATFORMS,
    PromptsConfig,
    config_to_dict,
    default_model_for,
    is_secret_key,
    mask_value,
    parse_value,
)
from memsearch.errors import ConfigError

__all__ = ["GLOBAL_SECTIONS", "Section", "Wizard", "ask_global", "ask_project"]

#: The maintenance tasks the wizard asks about (memory_to_skill is set with ``config set``).
_MAINTENANCE_TASKS = ("project_review", "user_profile")


# click >= 8.2 makes ParamType generic, but subscripting it fails at runtime on 8.1 (still supported).
class _ConfigValue(click.ParamType):  # type: ignore[type-arg]
    """A prompt answer converted and checked like a ``config set`` value (so ``env:VAR`` is
    accepted too, and an unknown provider is not); a bad answer is asked again."""

    name = "value"

    def __init__(self, key: str) -> None:
        self.key = key

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_value(self.key, value.strip() if isinstance(value, str) else value)
        except ConfigError as exc:
            self.fail(exc.one_line(), param, ctx)


class Wizard:
    """Asks questions with defaults from ``current`` and collects answers as nested updates."""

    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current
        self.updates: dict[str, Any] = {}

    def now(self, key: str) -> Any:
        node: Any = self.current
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def put(self, key: str, value: Any) -> None:
        node = self.updates
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value

    def text(self, key: str, label: str, default: str | None = None) -> str:
        """A free-text answer; a secret's current value is shown masked and kept on Enter."""
        value = str(self.now(key) or "") if default is None else default
        kind = _ConfigValue(key)
        if is_secret_key(key) and value:
            masked = f"{label} [{mask_value(value)}]"
            answer = click.prompt(masked, default=value, show_default=False, type=kind)
        else:
            answer = click.prompt(label, default=value, show_default=bool(value), type=kind)
        result = str(answer)
        self.put(key, result)
        return result

    def number(self, key: str, label: str) -> None:
        self.put(key, click.prompt(label, default=self.now(key), type=_ConfigValue(key)))

    def flag(self, key: str, label: str) -> bool:
        """A yes/no question; a current ``env:`` reference is offered (and kept) as text instead."""
        current = self.now(key)
        if isinstance(current, str):
            answer = click.prompt(label, default=current, type=_ConfigValue(key))
        else:
            answer = click.confirm(label, default=bool(current))
        self.put(key, answer)
        return answer is True

    def model(self, key: str, label: str, provider_key: str, provider: str, suggested: str) -> None:
        """The model question, whose default follows the provider just typed.

        Keeping the provider's own default writes ``""`` (= "the provider's default"), so a later
        provider switch does not keep a model that belongs to another provider.
        """
        current_model = str(self.now(key) or "")
        same_provider = provider == str(self.now(provider_key) or "")
        default = current_model if same_provider and current_model else suggested
        answer = self.text(key, label, default=default)
        if suggested and answer == suggested:
            self.put(key, "")

    def shown(self, key: str) -> str:
        """A current value for a section's summary line: masked when secret, ``(none)`` when empty."""
        value = self.now(key)
        if isinstance(value, bool):
            return "yes" if value else "no"
        text = (
            str(mask_value(value) if is_secret_key(key) else value) if value not in (None, "") else "(none)"
        )
        return " ".join(text.split())


@dataclass(frozen=True)
class Section:
    """One section of the wizard: its title, what its summary line shows, its questions."""

    title: str
    summary: Callable[[Wizard], str]
    ask: Callable[[Wizard], None]


def _values(*keys: str) -> Callable[[Wizard], str]:
    """A summary of these keys' current values: ``uri ~/.memsearch/milvus.db, collection c``."""
    return lambda w: ", ".join(f"{key.rsplit('.', 1)[-1]} {w.shown(key)}" for key in keys)


def _milvus(w: Wizard) -> None:
    w.text("milvus.uri", "  Milvus URI (a local path ending in .db, or http(s)://host:port)")
    w.text("milvus.token", "  Milvus token (empty for none)")
    w.text("milvus.collection", "  Collection name")


def _embedding_now(w: Wizard) -> str:
    provider = str(w.now("embedding.provider") or "")
    model = str(w.now("embedding.model") or "") or f"{default_model_for(provider)} (its default)"
    return f"provider {w.shown('embedding.provider')}, model {model}"


def _embedding(w: Wizard) -> None:
    provider = w.text(
        "embedding.provider", "  Provider (onnx/openai/google/voyage/jina/mistral/ollama/local)"
    )
    w.model("embedding.model", "  Model", "embedding.provider", provider, default_model_for(provider))
    w.text("embedding.base_url", "  Base URL (empty for the provider default)")
    w.text("embedding.api_key", "  API key (empty for the provider's env variable, or env:VAR_NAME)")


def _chunking(w: Wizard) -> None:
    w.number("chunking.max_chunk_size", "  Max chunk size (chars)")
    w.number("chunking.overlap_lines", "  Overlap lines")


def _watch(w: Wizard) -> None:
    w.number("watch.debounce_ms", "  Debounce (ms)")


def _llm(w: Wizard) -> None:
    llm = w.text("llm.provider", "  Provider (empty/openai/anthropic/gemini)")
    w.model("llm.model", "  Model", "llm.provider", llm, LLM_DEFAULT_MODELS.get(llm, ""))
    w.text("llm.base_url", "  Base URL (empty for the provider default)")
    w.text("llm.api_key", "  API key (empty for the provider's env variable, or env:VAR_NAME)")


def _summaries_now(w: Wizard) -> str:
    on = [p for p in PLUGIN_PLATFORMS if w.now(f"plugins.{p}.summarize.enabled") is not False]
    providers = {p: str(w.now(f"plugins.{p}.summarize.provider") or "") for p in PLUGIN_PLATFORMS}
    routed = [p for p, name in providers.items() if name not in ("", "native")]
    text = f"on for {len(on)} of {len(PLUGIN_PLATFORMS)} platforms"
    return text + (f", routed to a provider: {' '.join(routed)}" if routed else ", by the agent itself")


def _summaries(w: Wizard) -> None:
    for platform in PLUGIN_PLATFORMS:
        base = f"plugins.{platform}.summarize"
        w.flag(f"{base}.enabled", f"  {platform}: summarize each turn")
        w.text(f"{base}.provider", f"  {platform}: summarizer (empty or native = the agent itself)")
        w.text(f"{base}.model", f"  {platform}: summarizer model (empty = its default)")


def _maintenance_now(w: Wizard) -> str:
    on = [
        f"{p} {t}"
        for p in PLUGIN_PLATFORMS
        for t in _MAINTENANCE_TASKS
        if w.now(f"plugins.{p}.{t}.enabled") not in (False, None)
    ]
    return f"enabled: {', '.join(on)}" if on else "none enabled"


def _maintenance(w: Wizard) -> None:
    for platform in PLUGIN_PLATFORMS:
        for task in _MAINTENANCE_TASKS:
            base = f"plugins.{platform}.{task}"
            if not w.flag(f"{base}.enabled", f"  {platform}: {task} enabled"):
                continue  # details of a disabled task are kept as they are
            w.text(f"{base}.provider", "    provider (native = the agent itself)")
            w.text(f"{base}.model", "    model (empty = its default)")
            w.number(f"{base}.min_interval_hours", "    min interval (hours)")
            w.text(f"{base}.input_dir", "    input dir")
            w.text(f"{base}.output_file", "    output file")


def _prompts_now(w: Wizard) -> str:
    custom = [name for name in config_to_dict(PromptsConfig()) if w.now(f"prompts.{name}")]
    return f"custom: {', '.join(custom)}" if custom else "all built-in"


def _prompts(w: Wizard) -> None:
    for name in config_to_dict(PromptsConfig()):
        w.text(f"prompts.{name}", f"  {name} prompt file (empty = built-in)")


#: The global wizard, in the order it asks.
GLOBAL_SECTIONS: tuple[Section, ...] = (
    Section("Milvus", _values("milvus.uri", "milvus.collection"), _milvus),
    Section("Embedding", _embedding_now, _embedding),
    Section("Chunking", _values("chunking.max_chunk_size", "chunking.overlap_lines"), _chunking),
    Section("Watch", _values("watch.debounce_ms"), _watch),
    Section("LLM (for memsearch compact)", _values("llm.provider", "llm.model"), _llm),
    Section("Plugin turn summaries", _summaries_now, _summaries),
    Section("Advanced maintenance", _maintenance_now, _maintenance),
    Section("Prompts", _prompts_now, _prompts),
)


def _header(title: str, first: bool = False) -> None:
    click.echo(f"── {title} ──" if first else f"\n── {title} ──")


def ask_global(w: Wizard) -> None:
    """Each section of :data:`GLOBAL_SECTIONS`: its current values, then its questions if wanted."""
    click.echo("Each section shows its settings now; answer y to change them, Enter keeps them.")
    for section in GLOBAL_SECTIONS:
        click.echo(f"\n── {section.title} ── {section.summary(w)}")
        if click.confirm("  Change these settings?", default=False):
            section.ask(w)


def ask_project(w: Wizard) -> None:
    """The project file's keys (the allowlisted indexing keys), all of them."""
    click.echo("Project config is limited to low-risk local indexing keys.")
    w.text("milvus.collection", "  Collection name")
    w.number("embedding.batch_size", "  Embedding batch size (0 = provider default)")
    _header("Chunking")
    _chunking(w)
    _header("Watch")
    _watch(w)
