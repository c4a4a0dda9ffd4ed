"""``memsearch compact`` (indexed chunks → a summary in today's memory file) and ``memsearch summarize``
(a transcript turn on stdin → bullet notes, for the agent plugins)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from memsearch.cli.options import common_options, resolve
from memsearch.cli.render import plural, shown


@click.command("compact")
@click.option(
    "--source",
    "-s",
    default=None,
    help="Only chunks from this file, or from the files under this folder (default: all chunks).",
)
@click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write to OUTPUT_DIR/memory/YYYY-MM-DD.md (default: the current directory).",
)
@click.option(
    "--llm-provider",
    default=None,
    help="openai (default), openai-compatible, anthropic, gemini, or an [llm.providers] name.",
)
@click.option("--llm-model", default=None, help="LLM model (default: the provider's default).")
@click.option("--llm-base-url", default=None, help="Base URL of the LLM API (a proxy or a local server).")
@click.option("--llm-api-key", default=None, help="LLM API key (or env:VAR).")
@click.option(
    "--prompt", "prompt_template", default=None, help="Prompt template text; {chunks} marks the chunks."
)
@click.option(
    "--prompt-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="File holding the prompt template (overrides prompts.compact).",
)
@click.option(
    "--token-budget",
    type=click.IntRange(min=1),
    default=None,
    help="Most tokens of chunk text sent to the LLM; older chunks beyond it are left out [default: 60000].",
)
@common_options
def compact(
    source: str | None,
    output_dir: Path | None,
    prompt_template: str | None,
    token_budget: int | None,
    **flags: Any,
) -> None:
    """Summarise indexed chunks into a memory file with an LLM."""
    from memsearch.compact import DEFAULT_TOKEN_BUDGET, compact_memory, compact_template
    from memsearch.engine.memory import open_memory
    from memsearch.llm import EmptySummaryError, LLMSettings

    cfg = resolve(flags)
    llm = LLMSettings.for_compact(cfg).check()
    template = compact_template(cfg, prompt_template)
    budget = DEFAULT_TOKEN_BUDGET if token_budget is None else token_budget
    # Through the memory service when one runs (it reads the chunks and indexes the new file);
    # the LLM is called from this process, with this process's keys and environment.
    with open_memory(cfg) as memory:
        result = asyncio.run(
            compact_memory(
                memory,
                source=source,
                llm=llm,
                prompt_template=template,
                base_dir=output_dir,
                token_budget=budget,
            )
        )
    if result.empty_answer:
        raise EmptySummaryError(
            f"The LLM returned an empty summary of {plural(result.chunks_used, 'chunk')}; "
            "nothing was written.",
            hint="Try again, or another model or prompt.",
        )
    if result.file is None:
        source = result.source
        click.echo(f"No chunks matched source: {shown(source)}" if source else "No chunks to compact.")
        return
    click.echo(f"Compact complete. Summary:\n\n{result.summary}\n")
    click.echo(
        f"Appended to {shown(result.file)} ({result.chunks_used} of {plural(result.chunks_total, 'chunk')} "
        "summarised)."
    )
    if result.chunks_dropped:
        click.echo(
            f"Left out the {plural(result.chunks_dropped, 'oldest chunk')}: they did not fit the "
            f"{result.token_budget}-token budget (--token-budget)."
        )


@click.command("summarize")
@click.option(
    "--plugin",
    required=True,
    help="Plugin whose summarize settings to use: claude-code, codex, opencode, openclaw or dsh.",
)
@click.option("--agent-name", default=None, help="The agent's name in the prompt (default: the plugin name).")
def summarize(plugin: str, agent_name: str | None) -> None:
    """Summarise a transcript from stdin into bullet notes.

    Uses the LLM named by plugins.PLUGIN.summarize.provider, an [llm.providers.NAME] entry. Exits 2
    when the plugin is set to let its host agent summarise (provider empty or "native").
    """
    from memsearch.compact import NativeSummarizationError, summarize_transcript
    from memsearch.llm import EmptySummaryError

    cfg = resolve({})
    # Hooks pipe whatever the host wrote; bytes that are not UTF-8 must not end the summary.
    raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    transcript = raw.decode("utf-8", errors="replace")
    try:
        summary = asyncio.run(summarize_transcript(transcript, plugin=plugin, agent_name=agent_name, cfg=cfg))
    except NativeSummarizationError as exc:
        # Not a failure: the exit code tells the hook to use the host agent's own summariser.
        click.echo(exc.message, err=True)
        click.get_current_context().exit(exc.exit_code)
    if not transcript.strip():
        return
    if not summary:
        raise EmptySummaryError(
            "The LLM returned an empty summary.", hint="Try again, or another model for this provider."
        )
    click.echo(summary)
