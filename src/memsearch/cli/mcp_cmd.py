"""``memsearch mcp``: serve the memory to an MCP client (an agent host) over stdin/stdout."""

from __future__ import annotations

from typing import Any

import click

from memsearch.cli.options import common_options
from memsearch.mcp.budget import MIN_RESULT_CHARS


@click.command("mcp")
@click.option(
    "--project",
    default=None,
    type=click.Path(file_okay=False),
    help="The project whose memory to serve (default: the git root of the working folder, "
    "else the working folder; MEMSEARCH_DIR names a shared memory folder, as for the plugins).",
)
@click.option(
    "--max-result-chars",
    type=click.IntRange(min=MIN_RESULT_CHARS, max=200_000),
    default=None,
    help="Characters one tool result may hold (default 6000); a result cut short says how to get the rest.",
)
@click.option(
    "--http-port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    help="Serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio, for hosts that cannot start "
    "processes; requests need the bearer token kept in ~/.memsearch/mcp-token.",
)
@common_options
def mcp(project: str | None, max_result_chars: int | None, http_port: int | None, **flags: Any) -> None:
    """Serve this project's memory as an MCP server over stdio (for agent hosts).

    Without --collection the project and its collection follow the agent plugins' rules, so the
    server and a host's plugin share one memory. Stops when the client closes stdin (with
    --http-port: on SIGINT or SIGTERM).

    \b
    Example (docs/mcp.md has every host's configuration):
      claude mcp add memsearch -- memsearch mcp
    """
    from memsearch.errors import MemSearchError

    try:
        import mcp.server.mcpserver  # noqa: F401  (the SDK, before anything else is done)
    except ImportError as exc:  # the SDK is an optional extra
        raise MemSearchError(
            f"the MCP server needs the mcp package ({exc.name or exc})",
            hint="pip install 'mcp>=2,<3' (the checkout's mcp extra: pip install -e '.[mcp]')",
        ) from None
    from memsearch.mcp.budget import DEFAULT_RESULT_CHARS, Budget
    from memsearch.mcp.scope import McpScope
    from memsearch.mcp.server import run_http, run_stdio

    scope = McpScope.build(flags, project)
    budget = Budget(result_chars=max_result_chars or DEFAULT_RESULT_CHARS)
    if http_port is None:
        run_stdio(scope, budget)
    else:
        run_http(scope, budget, http_port)
