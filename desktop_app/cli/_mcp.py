"""`agent-desk mcp list`: the MCP servers a project's runtime sees, with their state."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import EXIT_OK
from ._db import open_or_create_store

if TYPE_CHECKING:
    from ..core import McpServerInfo


# mcp --------------------------------------------------------------------------------------------------
async def mcp_list_command(args: argparse.Namespace) -> int:
    """Start the project's servers (each ready or failed), print them, close them."""
    from ..config import Settings
    from ..runtime import open_runtime, project_for_dir, resolve_image

    image = resolve_image(args.image) if args.image is not None else None  # checked before anything is stored
    settings = await asyncio.to_thread(Settings.load)
    if args.sandbox:
        settings.sandbox = args.sandbox
    store = await open_or_create_store(args)
    try:
        project = await project_for_dir(store, args.project, image=image, settings=settings)
    except BaseException:
        await store.close()
        raise
    if args.sandbox:
        project.settings["sandbox"] = args.sandbox
    runtime = await open_runtime(settings, project, store=store)
    try:
        servers = runtime.mcp_servers()
    finally:
        await runtime.close()
    if args.json:
        print(json.dumps([s.to_dict() for s in servers], indent=2))
        return EXIT_OK
    if not servers:
        print(f"no MCP servers: add them to {Path(project.path) / '.agent-desk/mcp.json'} or your settings",
              file=sys.stderr)
    for s in servers:
        print(_mcp_line(s))
    return EXIT_OK


def _mcp_line(s: McpServerInfo) -> str:
    where = {"host": "host (unsandboxed)", "http": "http (network)"}.get(s.where.value, s.where.value)
    lines = [f"{s.name}  [{s.state.value}]  {where}  {s.source}" + (f"  {s.version}" if s.version else "")]
    if s.error:
        lines.append(f"  ! {s.error}")
    if s.stderr_tail.strip():
        lines.append("  stderr: " + s.stderr_tail.strip().splitlines()[-1][:200])
    for t in s.tools:
        flags = ", ".join(f for f, on in (("read-only", t.read_only), ("destructive", t.destructive),
                                          ("off", not t.enabled)) if on)
        lines.append(f"  {t.desk_name}" + (f"  ({flags})" if flags else ""))
    return "\n".join(lines)
