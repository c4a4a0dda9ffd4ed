"""``memsearch config``: the setup wizard and get/set/list of settings.

Owns only argument parsing, the wizard's questions and rendering; reading, validating, merging and
writing settings live in :mod:`memsearch.config`. Errors are raised as ``memsearch.errors`` classes
and printed by the root group as one ``Error: ...`` line.

Secrets are masked in everything this group prints unless ``--show-secrets`` is given; ``env:VAR``
references are names, not secrets, and are always shown. The wizard starts from the *unresolved*
files, so an ``env:`` reference is offered and written back as written, never as its value.
"""

from __future__ import annotations

import json
from typing import Any

import click

from memsearch.cli.flags import config_from_flags
from memsearch.config import (
    LLM_DEFAULT_MODELS,
    PLUGIN_PLATFORMS,
    MemSearchConfig,
    PromptsConfig,
    config_to_dict,
    default_model_for,
    filter_project_config,
    find_project_config,
    get_config_value,
    global_config_path,
    is_secret_key,
    load_config_file,
    mask_secrets,
    mask_value,
    merged_file_config,
    parse_value,
    project_config_target,
    set_config_value,
    update_config_file,
)
from memsearch.errors import ConfigError


@click.group("config")
def config() -> None:
    """Manage memsearch configuration."""


# --- wizard --------------------------------------------------------------------------------------

#: The platforms the wizard asks about.
_WIZARD_PLATFORMS = PLUGIN_PLATFORMS
_MAINTENANCE_TASKS = ("project_review", "user_profile")


# click >= 8.2 makes ParamType generic, but subscripting it fails at runtime on 8.1 (still supported).
class _ConfigValue(click.ParamType):  # type: ignore[type-arg]
    """A prompt answer converted like ``config set`` would (so ``env:VAR`` is accepted too);
    a bad answer is asked again."""

    name = "value"

    def __init__(self, key: str) -> None:
        self.key = key

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_value(self.key, value)
        except ConfigError as exc:
            self.fail(exc.message, param, ctx)


class _Wizard:
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
        if is_secret_key(key) and value:
            answer = click.prompt(f"{label} [{mask_value(value)}]", default=value, show_default=False)
        else:
            answer = click.prompt(label, default=value, show_default=bool(value))
        result = str(answer).strip()
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


def _header(title: str, first: bool = False) -> None:
    click.echo(f"── {title} ──" if first else f"\n── {title} ──")


def _project_wizard(w: _Wizard) -> None:
    click.echo("Project config is limited to low-risk local indexing keys.")
    w.text("milvus.collection", "  Collection name")
    w.number("embedding.batch_size", "  Embedding batch size (0 = provider default)")
    _header("Chunking")
    w.number("chunking.max_chunk_size", "  Max chunk size (chars)")
    w.number("chunking.overlap_lines", "  Overlap lines")
    _header("Watch")
    w.number("watch.debounce_ms", "  Debounce (ms)")


def _global_wizard(w: _Wizard) -> None:
    _header("Milvus", first=True)
    w.text("milvus.uri", "  Milvus URI (a local path, or http(s)://host:port)")
    w.text("milvus.token", "  Milvus token (empty for none)")
    w.text("milvus.collection", "  Collection name")

    _header("Embedding")
    provider = w.text(
        "embedding.provider", "  Provider (onnx/openai/google/voyage/jina/mistral/ollama/local)"
    )
    w.model("embedding.model", "  Model", "embedding.provider", provider, default_model_for(provider))
    w.text("embedding.base_url", "  Base URL (empty for the provider default)")
    w.text("embedding.api_key", "  API key (empty for the provider's env variable, or env:VAR_NAME)")

    _header("Chunking")
    w.number("chunking.max_chunk_size", "  Max chunk size (chars)")
    w.number("chunking.overlap_lines", "  Overlap lines")

    _header("Watch")
    w.number("watch.debounce_ms", "  Debounce (ms)")

    _header("LLM (for memsearch compact)")
    llm = w.text("llm.provider", "  Provider (empty/openai/anthropic/gemini)")
    w.model("llm.model", "  Model", "llm.provider", llm, LLM_DEFAULT_MODELS.get(llm, ""))
    w.text("llm.base_url", "  Base URL (empty for the provider default)")
    w.text("llm.api_key", "  API key (empty for the provider's env variable, or env:VAR_NAME)")

    _header("Plugin summarize routing")
    for platform in _WIZARD_PLATFORMS:
        base = f"plugins.{platform}.summarize"
        w.flag(f"{base}.enabled", f"  {platform}: summarize each turn")
        w.text(f"{base}.provider", f"  {platform}: summarizer (empty or native = the agent itself)")
        w.text(f"{base}.model", f"  {platform}: summarizer model (empty = its default)")

    _header("Advanced maintenance")
    for platform in _WIZARD_PLATFORMS:
        for task in _MAINTENANCE_TASKS:
            base = f"plugins.{platform}.{task}"
            if not w.flag(f"{base}.enabled", f"  {platform}: {task} enabled"):
                continue  # details of a disabled task are kept as they are
            w.text(f"{base}.provider", "    provider (native = the agent itself)")
            w.text(f"{base}.model", "    model (empty = its default)")
            w.number(f"{base}.min_interval_hours", "    min interval (hours)")
            w.text(f"{base}.input_dir", "    input dir")
            w.text(f"{base}.output_file", "    output file")

    _header("Prompts")
    for name in config_to_dict(PromptsConfig()):
        w.text(f"prompts.{name}", f"  {name} prompt file (empty = built-in)")


@config.command("init")
@click.option("--project", is_flag=True, help="Write ./.memsearch.toml (indexing keys only).")
def init_cmd(project: bool) -> None:
    """Interactively write the global (or project) config file.

    Keys the wizard does not ask about are kept as they are in the file.
    """
    target = project_config_target() if project else global_config_path()
    existing = load_config_file(target)
    w = _Wizard(merged_file_config(include_project=project))
    click.echo("memsearch configuration wizard")
    click.echo(f"Writing to: {target}")
    click.echo("")
    (_project_wizard if project else _global_wizard)(w)
    indexing = existing.get("indexing")
    indexing = indexing if isinstance(indexing, dict) else {}
    if "ignore_files" not in indexing:
        w.put("indexing.ignore_files", [".gitignore"])
    if "exclude" not in indexing:
        w.put("indexing.exclude", [])
    update_config_file(target, w.updates)
    click.echo(f"\nConfig saved to {target}")


# --- set / get / list ----------------------------------------------------------------------------


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--project", is_flag=True, help="Write to the project file (indexing keys only).")
def set_cmd(key: str, value: str, project: bool) -> None:
    """Set KEY (section.field) to VALUE in the global or project config file."""
    target = set_config_value(key, value, project=project)
    shown = mask_value(value) if is_secret_key(key) else value
    click.echo(f"Set {key} = {shown} in {target}")


def _format_value(value: Any) -> str:
    """Booleans as TOML writes them, lists and tables as JSON, everything else as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


_default_collection = click.option(
    "--default-collection",
    default=None,
    help="Collection to assume when no config file names one (what the agent plugins pass).",
)


def _resolved_config(default_collection: str | None) -> MemSearchConfig:
    return config_from_flags({"default_collection": default_collection})


@config.command("get")
@click.argument("key")
@click.option("--show-secrets", is_flag=True, help="Print API keys and tokens instead of ********.")
@_default_collection
def get_cmd(key: str, show_secrets: bool, default_collection: str | None) -> None:
    """Print the resolved value of KEY (a partial key prints a table as JSON)."""
    value = get_config_value(key, _resolved_config(default_collection))
    if not show_secrets:
        if isinstance(value, dict):
            value = mask_secrets(value)
        elif is_secret_key(key):
            value = mask_value(value)
    click.echo(_format_value(value))


@config.command("list")
@click.option(
    "--resolved", "scope", flag_value="resolved", default=True, help="All sources merged (default)."
)
@click.option("--global", "scope", flag_value="global", help="The raw global file.")
@click.option("--project", "scope", flag_value="project", help="The raw project file.")
@click.option("--json-output", "-j", is_flag=True, help="One line of JSON.")
@click.option("--show-secrets", is_flag=True, help="Print API keys and tokens instead of ********.")
@_default_collection
def list_cmd(scope: str, json_output: bool, show_secrets: bool, default_collection: str | None) -> None:
    """Show the configuration: resolved, or one file as written."""
    ignored: list[str] = []
    if scope == "global":
        path = global_config_path()
        data, label = load_config_file(path), f"Global ({path})"
    elif scope == "project":
        found = find_project_config()
        data = load_config_file(found) if found else {}
        label = f"Project ({found})" if found else "Project (no .memsearch.toml found)"
        ignored = filter_project_config(data)[1]
    else:
        data = _without_unused_deprecated(config_to_dict(_resolved_config(default_collection)))
        label = "Resolved (all sources merged)"
    if not show_secrets:
        data = mask_secrets(data)
    if json_output:
        click.echo(json.dumps(data, ensure_ascii=False))
        return
    import tomli_w

    click.echo(f"# {label}\n")
    click.echo(tomli_w.dumps(data).rstrip("\n") if data else "(empty)")
    if ignored:
        click.echo(f"\n# Ignored (not allowed in a project file): {', '.join(ignored)}")


def _without_unused_deprecated(data: dict[str, Any]) -> dict[str, Any]:
    """The resolved config without the deprecated ``[compact]`` section while nobody set it: its
    defaults shown beside ``[llm]`` and ``[prompts]`` would read as a current section (a file that
    sets it gets it shown, and the load warns on stderr where its keys moved)."""
    if data.get("compact") == config_to_dict(MemSearchConfig())["compact"]:
        del data["compact"]
    return data
