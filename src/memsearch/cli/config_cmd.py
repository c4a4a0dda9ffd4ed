"""``memsearch config``: the setup wizard and get/set/list of settings.

Owns only argument parsing and rendering; the wizard's questions are :mod:`.config_wizard`;
reading, validating, merging and writing settings live in :mod:`memsearch.config`. Errors are
raised as ``memsearch.errors`` classes and printed by the root group as one ``Error: ...`` line.

Secrets are masked in everything this group prints unless ``--show-secrets`` is given; ``env:VAR``
references are names, not secrets, and are always shown.
"""

from __future__ import annotations

import json
from typing import Any

import click

from memsearch.cli.flags import config_from_flags
from memsearch.config import (
    MemSearchConfig,
    config_to_dict,
    filter_project_config,
    find_project_config,
    get_config_value,
    global_config_path,
    is_secret_key,
    load_config_file,
    mask_secrets,
    mask_value,
    merged_file_config,
    project_config_target,
    set_config_value,
    update_config_file,
)
from memsearch.errors import ConfigError


@click.group("config")
def config() -> None:
    """Manage memsearch configuration."""


@config.command("init")
@click.option("--project", is_flag=True, help="Write ./.memsearch.toml (indexing keys only).")
def init_cmd(project: bool) -> None:
    """Interactively write the global (or project) config file.

    The global wizard goes section by section: each shows its settings now and asks whether to
    change them (Enter keeps the section). Keys the wizard does not ask about are kept as they are
    in the file. Nothing is written until the last answer.
    """
    from memsearch.cli.config_wizard import Wizard, ask_global, ask_project

    target = project_config_target() if project else global_config_path()
    existing = load_config_file(target)
    w = Wizard(merged_file_config(include_project=project))
    click.echo("memsearch configuration wizard")
    click.echo(f"Writing to: {target}")
    click.echo("")
    try:
        (ask_project if project else ask_global)(w)
    except click.Abort:  # end of input (stdin closed mid-way) or Ctrl-C at a question
        click.echo("", err=True)
        raise ConfigError(
            f"config init stopped before its last question (end of input, or Ctrl-C): "
            f"nothing was written to {target}",
            hint="run it at a terminal, or pipe one answer per line (an empty line keeps a value, n "
            "skips a section); `memsearch config set KEY VALUE` sets a single key",
        ) from None
    indexing = existing.get("indexing")
    indexing = indexing if isinstance(indexing, dict) else {}
    if "ignore_files" not in indexing:
        w.put("indexing.ignore_files", [".gitignore"])
    if "exclude" not in indexing:
        w.put("indexing.exclude", [])
    update_config_file(target, w.updates)
    click.echo(f"\nConfig saved to {target}")


# --- set / get / list ----------------------------------------------------------------------------


# A value such as -5 is a value, not an option: it reaches the range check, which says what fits.
@config.command("set", context_settings={"ignore_unknown_options": True})
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
