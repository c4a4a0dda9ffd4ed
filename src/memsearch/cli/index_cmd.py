"""``memsearch index``: bring the index up to date with markdown files."""

from __future__ import annotations

import sys
from typing import Any

import click

from memsearch.cli.options import common_options, indexing_options, resolve
from memsearch.cli.render import plural, shown
from memsearch.engine.index_pipeline import PhasedProgress
from memsearch.errors import CommandInterruptedError, IndexingError


@click.command("index")
@click.argument("paths", nargs=-1, required=True, type=click.Path())  # a missing one: the library says
@common_options
@indexing_options
@click.option("--force", is_flag=True, help="Re-embed every chunk, even unchanged ones.")
def index(paths: tuple[str, ...], force: bool, description: str | None, **flags: Any) -> None:
    """Index markdown files from PATHS.

    Only changed files are re-embedded; an unchanged folder returns at once. Exits 1 when any file
    could not be indexed (each is listed on stderr with the reason). A path that no longer exists
    (a folder moved or deleted) has what the index held under it removed; one under which it held
    nothing is an error.

    \b
    Example:
      memsearch index ./memory
      memsearch index ./memory ./notes/decisions.md --force
    """
    from memsearch.engine.memory import open_memory
    from memsearch.index_state import IndexRun

    cfg = resolve(flags)
    from memsearch.cli.undo import recover_first

    recover_first(cfg)  # a forget, scan --redact or restore a killed process left: completed first
    follow_links = not flags.get("no_follow_links")
    try:
        with open_memory(cfg, paths, description=description or "", follow_links=follow_links) as memory:
            run = IndexRun.of("index", paths, cfg)
            report = run.record(lambda: memory.index_with_report(force=force, progress=_progress_bar()))
    except KeyboardInterrupt:
        # The indexer keeps what it did when it is cancelled (memsearch.engine.indexer): each file
        # whose chunks are all stored is in the manifest, each vector embedded is in the cache.
        raise CommandInterruptedError(
            "index interrupted: the files finished so far are indexed and searchable, and every "
            "chunk embedded so far is kept in the embedding cache",
            hint="run the same command again to finish; it embeds only what is still missing",
        ) from None
    for warning in report.warnings:
        click.echo(f"Warning: {shown(warning)}", err=True)
    click.echo(f"Indexed {plural(report.indexed_chunks, 'chunk')}.")
    if report.multilingual_embedded:
        click.echo(f"Multilingual leg: second vectors for {plural(report.multilingual_embedded, 'chunk')}.")
    if report.missing_paths:
        from memsearch.errors import SourceFileNotFoundError

        raise SourceFileNotFoundError(
            f"{', '.join(shown(p) for p in report.missing_paths)}: no such file or folder, and the "
            "index holds nothing there",
            hint="check the path (the other paths were indexed)"
            if len(paths) > len(report.missing_paths)
            else "check the path",
        )
    if report.failed_files:
        for failure in report.failed_files:
            click.echo(f"Failed: {shown(failure.path)}: {shown(failure.error)}", err=True)
        raise IndexingError(
            f"{plural(len(report.failed_files), 'file')} could not be indexed",
            hint="fix or exclude the files listed above; the other files were indexed",
        )


class _Bar(PhasedProgress):
    """A progress bar on stderr, only when stderr is a terminal (hooks and pipes stay quiet); one
    bar per phase of the run (the chunks, then the multilingual leg's second vectors)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._label = "Embedding"

    def phase(self, label: str, total: int) -> None:
        self._close()
        self._label = label

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self._label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._bar.pos)
        if done >= total:
            self._close()

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _progress_bar() -> _Bar | None:
    return _Bar() if sys.stderr.isatty() else None
