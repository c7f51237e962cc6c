"""Raw JSON-RPC lines over a ProcessChannel, for tests and benchmarks that speak to a real MCP server without
the client (stdio transport: one JSON object per line)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

MCP_IMAGE = os.environ.get("AGENT_DESK_MCP_IMAGE", "agent-desk/mcp:latest")
PROTOCOL = "2025-06-18"


def need_mcp_image(client: Any) -> str:
    """The mcp catalog image, or a skip (a failure when CI=true): engine.sh builds it."""
    from tests.conftest import no_engine

    try:
        client.images.get(MCP_IMAGE)
    except Exception:
        no_engine(f"image {MCP_IMAGE} is missing (run sandbox_images/engine.sh)")
    return MCP_IMAGE


class Wire:
    """Requests out, answers matched by id; notifications the server sends are kept in `notes`."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.buf = b""
        self.next_id = 0
        self.notes: list[dict[str, Any]] = []

    async def send(self, msg: dict[str, Any]) -> None:
        await self.channel.write(json.dumps(msg).encode() + b"\n")

    async def message(self) -> dict[str, Any]:
        async with asyncio.timeout(60.0):
            while b"\n" not in self.buf:
                data = await self.channel.read()
                if not data:
                    raise EOFError(f"the server ended (exit {self.channel.returncode}): {self.channel.stderr_tail()}")
                self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        while True:
            msg = await self.message()
            if msg.get("id") == self.next_id and ("result" in msg or "error" in msg):
                return msg
            self.notes.append(msg)

    async def initialize(self) -> dict[str, Any]:
        answer = await self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "agent-desk-tests", "version": "0"},
        })
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call's result: {"content": [...], "isError": bool}."""
        msg = await self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in msg, msg
        return msg["result"]


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")

