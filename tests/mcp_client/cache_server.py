"""A small MCP server (the mcp SDK, stdio) for the result-cache tests: `lookup` declares readOnlyHint and
idempotentHint, `clock` only readOnlyHint, `tally` no hint at all; each counts its own runs, and `tally`
answers with every count, so a test sees how many calls the server itself received."""

from __future__ import annotations

import json
from collections import Counter

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("cachetest")
RUNS: Counter[str] = Counter()


@server.tool(title="Look up a key", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def lookup(key: str) -> str:
    """The value of a key (the same every time, by the server's word)."""
    RUNS["lookup"] += 1
    return f"{key}#{RUNS['lookup']}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def clock(key: str) -> str:
    """Reads, but may answer differently each time: not idempotent."""
    RUNS["clock"] += 1
    return f"tick {RUNS['clock']}"


@server.tool()
def tally() -> str:
    """How many calls of each tool the server received (this one included)."""
    RUNS["tally"] += 1
    return json.dumps(dict(sorted(RUNS.items())))


if __name__ == "__main__":
    server.run("stdio")
