"""What ``search``, ``expand`` and ``transcript`` hand a model: held to the recall budget, and logged.

Why a module of its own: the recall skills read these commands' output, so it is context like any
other (``context.recall_tokens``, :mod:`memsearch.agent.context_budget`), and each call is a recall the
log counts (:mod:`memsearch.agent.recall_log`). The commands call one function each after they got their
result; the line saying what was left out goes to stderr, so ``--json-output`` stays valid JSON
(the model reads both streams of a command it ran).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from memsearch.engine.expand import Expansion

__all__ = ["expanded", "for_agent", "search_results", "transcript_read"]


#: Variables an agent host sets in the shell its model's commands run in (besides the session
#: variables of :func:`memsearch.agent.recall_log.caller`): Claude Code's ``CLAUDECODE=1``.
AGENT_SHELL_VARIABLES = ("CLAUDECODE",)


def for_agent(env: Any = None) -> bool:
    """Whether this command's output goes to an agent's model: a session or host is known
    (:func:`memsearch.agent.recall_log.caller`), or a host's own shell variable is set.

    Why only then: a person's ``memsearch search -k 20 --json-output | jq`` (or a script written for
    the original) must get every hit it asked for; the budget is for what lands in a model's
    context."""
    from memsearch.agent.recall_log import caller

    env = os.environ if env is None else env
    return any(caller(env)) or any(env.get(name, "").strip() for name in AGENT_SHELL_VARIABLES)


def search_results(cfg: Any, query: str, results: list[dict[str, Any]], store: str) -> list[dict[str, Any]]:
    """The hits that fit the recall budget when an agent reads them (:func:`for_agent`),
    lowest-ranked left out first (a line on stderr says so); the search is logged with the hits
    shown and their tokens."""
    from memsearch.agent import context_budget as cb
    from memsearch.agent import recall_log

    if not for_agent():
        recall_log.record(cfg, cfg.milvus.collection, "search", via="cli", query=query, hits=len(results))
        return results
    budget = cfg.context.recall_tokens
    fitted = cb.fit_items(results, budget, render=_rendered)
    kept = fitted.kept
    if results and not kept:  # the best hit alone is over budget: it shows, its text cut
        best = dict(results[0])
        text = str(best.get("content", ""))
        room = budget - cb.count_tokens(_rendered({**best, "content": ""}))
        while room > 0:  # JSON escapes (a newline is "\n") cost tokens the raw text does not
            best["content"] = cb.clip(text, room)[0]
            over = cb.count_tokens(_rendered(best)) - budget
            if over <= 0:
                break
            room -= over
        kept = [best]
    dropped = len(results) - len(kept)
    if dropped:
        more = f'memsearch search "<narrower words>"{store}'
        click.echo(cb.left_out_line(dropped, "lower-ranked hits", more), err=True)
    tokens = sum(cb.count_tokens(_rendered(hit)) for hit in kept)
    recall_log.record(
        cfg, cfg.milvus.collection, "search", via="cli", query=query, hits=len(kept), tokens=tokens
    )
    return kept


def _rendered(hit: dict[str, Any]) -> str:
    """A hit as ``--json-output`` prints it (what is counted)."""
    return json.dumps(hit, indent=2, ensure_ascii=False)


def expanded(cfg: Any, result: Expansion, store: str) -> Expansion:
    """The expansion with its text within the recall budget (the rest named on stderr); logged."""
    import dataclasses

    from memsearch.agent import context_budget as cb
    from memsearch.agent import recall_log

    if not for_agent():
        recall_log.record(cfg, cfg.milvus.collection, "expand", via="cli", chunk=result.chunk_hash[:64])
        return result
    kept, cut = cb.clip(result.content, cfg.context.recall_tokens)
    if cut:
        more = f"memsearch expand {result.chunk_hash} --lines 5{store}"
        click.echo(cb.left_out_line(cut, "tokens of the section", more), err=True)
        result = dataclasses.replace(result, content=kept, end_line=result.start_line + kept.count("\n"))
    recall_log.record(cfg, cfg.milvus.collection, "expand", via="cli", chunk=result.chunk_hash[:64])
    return result


def transcript_read(turns: int) -> None:
    """Log a ``transcript`` call under the collection the session exported (none: not logged)."""
    from memsearch.agent.recall_log import COLLECTION_ENV

    collection = os.environ.get(COLLECTION_ENV, "").strip()
    if not collection:
        return
    from memsearch.agent import recall_log
    from memsearch.config import resolve_config

    try:
        cfg = resolve_config()
    except Exception:
        return
    recall_log.record(cfg, collection, "expand", via="transcript", turns=turns)
