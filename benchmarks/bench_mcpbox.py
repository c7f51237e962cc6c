"""An MCP server in the sandbox, raw JSON-RPC over DockerSandbox.open_process: `mcp_start_s`, from a cold
start of a new container to mcp-server-time's first `tools/list` answer, and a warm tools/call's round trip
(the client part measures the whole pipeline)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid

from desktop_app.sandbox import DockerSandbox, SandboxConfig

from ._util import p50, repeat, report
from .bench_sandbox import _engine

IMAGE = os.environ.get("AGENT_DESK_MCP_IMAGE", "agent-desk/mcp:latest")
COLD_ROUNDS = 3
WARM_ROUNDS = 200


async def _cold_start(client, folder: str) -> tuple[float, DockerSandbox, object]:
    from tests.sandbox.mcp_wire import Wire

    sb = DockerSandbox(f"bench-mcp-{uuid.uuid4().hex[:8]}", folder, SandboxConfig(image=IMAGE), client=client)
    t0 = time.perf_counter()
    await sb.start()
    wire = Wire(await sb.open_process(["mcp-server-time", "--local-timezone", "UTC"]))
    await wire.initialize()
    tools = (await wire.request("tools/list"))["result"]["tools"]
    took = time.perf_counter() - t0
    assert tools, "mcp-server-time listed no tools"
    return took, sb, wire


async def _run(client, folder: str) -> None:
    colds, rtts = [], []
    for i in range(COLD_ROUNDS):
        took, sb, wire = await _cold_start(client, folder)
        colds.append(took)
        try:
            if i == 0:
                for n in range(WARM_ROUNDS + 20):
                    t = time.perf_counter()
                    await wire.call("get_current_time", {"timezone": "UTC"})
                    if n >= 20:
                        rtts.append((time.perf_counter() - t) * 1000)
        finally:
            await sb.close()
            await asyncio.to_thread(client.api.remove_container, sb.container_id, force=True)
    report("mcp_start_s", p50(colds), "s")
    report("mcp_raw_call_p50_ms", p50(rtts), "ms")


def main() -> None:
    client = _engine()
    if client is None:
        return
    try:
        client.images.get(IMAGE)
    except Exception:
        print(f"bench-skip mcp_start_s: {IMAGE} is missing (sandbox_images/engine.sh builds it)", flush=True)
        return
    folder = tempfile.mkdtemp(prefix="agent-desk-bench-mcp-")
    try:
        repeat(lambda: asyncio.run(_run(client, folder)), runs=3)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
