"""``memsearch forget --secret``: show where a value is, ask, and forget it everywhere
(:mod:`memsearch.engine.forget_secret`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from memsearch.cli.options import resolve
from memsearch.cli.render import plural, shown

#: How the confirmation names each kind of file, and what happens to it.
_KINDS = {
    "journal": "journal",
    "note": "note, kept without the value for `forget --undo`",
    "log": "memsearch's own file, masked in place",
    "backup": "a kept original: the value becomes a hole",
}


def forget_value(
    values: Sequence[str], memory_dirs: Sequence[str], *, dry_run: bool, yes: bool, flags: dict[str, Any]
) -> None:
    from memsearch import redact
    from memsearch.cli.undo import confirm, recover_first, report_outcome
    from memsearch.engine import forget_secret
    from memsearch.engine.memory import open_memory
    from memsearch.errors import ForgetTargetError, NothingToForgetError

    if len(values) != 1:
        raise ForgetTargetError(
            f"--secret forgets one value at a time ({len(values)} given)", hint="run it once per value"
        )
    value = values[0]
    forget_secret.check_value(value)
    cfg = resolve(flags)
    folders = [Path(".memsearch"), *(Path(d).expanduser() for d in memory_dirs)]
    roots = [f.resolve() for f in folders]
    recover_first(cfg)
    with open_memory(cfg, start=True) as memory:
        found = forget_secret.find(value, cfg, memory, roots)
        if not found.places and not found.rows:
            raise NothingToForgetError(
                "the value is in no memory file, log or index row: nothing was forgotten",
                hint="check the value (it is matched exactly, case included)",
            )
        click.echo(f"Will replace the value ({len(value)} characters) with {forget_secret.LABEL} in:")
        for place in found.places:
            click.echo(f"  {shown(place.path)}  ({_KINDS[place.kind]}): {plural(place.count, 'time')}")
        if found.rows:
            click.echo(f"  the index: {plural(len(found.rows), 'chunk')} (indexed again, or removed)")
        if dry_run:
            click.echo("Dry run: nothing was changed.")
            return
        if not yes:
            confirm("Forget the value everywhere?", flags, notes=any(p.kind == "note" for p in found.places))
        outcome = forget_secret.forget_secret(value, cfg, memory, roots, redact.current(cfg))
    click.echo(
        f"Forgot the value: {plural(len(outcome.changed), 'file')} rewritten, "
        f"{plural(len(outcome.scrubbed), 'file')} of memsearch's cleaned, "
        f"{plural(outcome.cache_deleted, 'cached vector')} deleted, reindexed."
    )
    report_outcome(outcome, kept="the notes without the value", undo="memsearch forget --secret - --undo")
