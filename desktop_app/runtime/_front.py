"""What the window reaches of the engine without a project's runtime: the built-in tools, the audit query and
export, the Docker engine's ping and images, the workspace's description and the MCP configuration's checks and
grants. Each imports its package on first use (the window is shown before them) and looks its function up there
at each call."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..core import AgentDeskError, Tool, ToolCallRecord

if TYPE_CHECKING:
    from ..mcp_client import ServerEntry
    from ..sandbox import ImageSpec, ImageStatus, ProjectImageBuild, ProjectImageSource
    from ..store import AuditQuery

Progress = Callable[[Any], None]  # a build's log line, called on the build's thread


def builtin_tools() -> list[Tool]:
    """A fresh instance of every built-in tool (names, groups and risks for the dialogs and filters)."""
    from ..tools import builtin_tools as tools

    return list(tools())


def audit_query(**filters: Any) -> AuditQuery:
    """The store's query of the audit log (the history window's filters and pages)."""
    from ..store import AuditQuery

    return AuditQuery(**filters)


def write_records(records: Iterable[ToolCallRecord], fmt: str, path: str | os.PathLike[str]) -> int:
    """Write `records` as CSV or JSON lines to `path`. Blocking: call it off the event loop."""
    from ..store import write_records as write

    return write(records, fmt, path)


def ping_docker() -> tuple[bool, str]:
    """Connect to the engine and ask its version. Blocking (the docker SDK): call it on a worker thread."""
    from ..sandbox import connect

    try:
        client = connect()
    except AgentDeskError as exc:
        return False, str(exc)
    try:
        return True, f"Docker {client.version().get('Version', '?')}"
    except Exception as exc:
        return False, str(exc).splitlines()[0][:200]
    finally:
        client.close()


# the sandbox images (blocking, Docker or files: call them on a worker thread) ---------------------------------
def list_images() -> list[ImageStatus]:
    """The catalog's images and whether each is built (asks Docker)."""
    from .. import sandbox

    return sandbox.list_images()


def load_catalog() -> dict[str, ImageSpec]:
    """The catalog of images that can be built (a file: works without Docker)."""
    from .. import sandbox

    return sandbox.load_catalog()


def build_image(name: str, on_progress: Progress | None = None) -> Any:
    from .. import sandbox

    return sandbox.build_image(name, on_progress=on_progress)


def find_project_image(folder: str | os.PathLike[str]) -> ProjectImageSource | None:
    """The project's own image file (a Dockerfile or a devcontainer), or None."""
    from .. import sandbox

    return sandbox.find_project_image(folder)


def project_image_digest(folder: str | os.PathLike[str], source: ProjectImageSource) -> str:
    from .. import sandbox

    return sandbox.project_image_digest(folder, source)


def project_image_tag(project_id: str, name: str, digest: str) -> str:
    from .. import sandbox

    return sandbox.project_image_tag(project_id, name, digest)


def build_project_image(folder: str | os.PathLike[str], *, project_id: str, name: str,
                        on_progress: Progress | None = None) -> ProjectImageBuild:
    from .. import sandbox

    return sandbox.build_project_image(folder, project_id=project_id, name=name, on_progress=on_progress)


def workspace_where(settings: Mapping[str, Any] | None = None) -> str:
    """Where a project's sandbox sees its folder ("remote engine, synced workspace (tcp://…)" on a remote one)."""
    from ..sandbox import workspace_where as where

    return where(settings)


def parse_mcp_servers(data: Any, *, source: str, where: str) -> list[ServerEntry]:
    """MCP server entries as the engine reads them, each with the error the engine would refuse it for."""
    from ..mcp_client import parse_servers

    return parse_servers(data, source=source, where=where)


def project_mcp_servers(project_dir: str | os.PathLike[str]) -> list[ServerEntry]:
    """The servers of the project's .agent-desk/mcp.json as it is now."""
    from ..mcp_client import read_project_servers

    return read_project_servers(project_dir)


def grant_mcp_server(settings: dict[str, Any], entry: ServerEntry, *, revoke: bool = False) -> dict[str, Any]:
    """The project's MCP grant keys with `entry`'s relaxation granted, bound to the entry as it is now."""
    from ..mcp_client import grant

    return grant(settings, entry, revoke=revoke)
