"""What the front ends (the CLI) ask of the parts below the runtime, through the runtime's face: audit queries
and the offline export check, the sandbox images, a project's MCP servers and their grants."""

# Each function imports its part when called: the store, the sandbox and the MCP client cost seconds to
# import, and `agent-desk --help` or `agent-desk images list` need only one of them.
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..core import ToolCallState

if TYPE_CHECKING:
    from ..mcp_client import ServerEntry
    from ..sandbox import ImageSpec, ImageStatus, ProjectImageBuild
    from ..store import AuditQuery, VerifyResult
    from ..store import SqlStore as SqlStore  # the type a front end's store has, re-exported by the runtime

Progress = Callable[[str], None]


def front_end_type(name: str) -> type:
    """A type the runtime's face names for a front end's annotations (SqlStore), imported when first asked for:
    the runtime's module `__getattr__`."""
    if name == "SqlStore":
        from ..store import SqlStore

        return SqlStore
    raise AttributeError(f"module 'desktop_app.runtime' has no attribute {name!r}")


# the audit --------------------------------------------------------------------------------------------
def audit_query(*, project_id: str | None = None, session_id: str | None = None, tool: str | None = None,
                tool_use_id: str | None = None,
                states: Iterable[ToolCallState | str] | ToolCallState | str | None = None,
                outcome: str | None = None, since: float | None = None, until: float | None = None,
                text: str | None = None, limit: int | None = 100) -> AuditQuery:
    """Which tool-call records to find (the store's AuditQuery: every field narrows, newest first)."""
    from ..store import AuditQuery

    return AuditQuery(project_id=project_id, session_id=session_id, tool=tool, tool_use_id=tool_use_id,
                      states=states, outcome=outcome, since=since, until=until, text=text, limit=limit)


def verify_audit_export(path: str | os.PathLike[str], trusted_keys: Iterable[str] = ()) -> VerifyResult:
    """Check a signed audit export offline (its signatures, the signed head, the chain it holds)."""
    from ..store import verify_export

    return verify_export(path, trusted_keys)


# the sandbox's images ---------------------------------------------------------------------------------
def resolve_image(name: str) -> str:
    """The image tag for a catalog name or a Docker reference; a malformed one is a ConfigError."""
    from ..sandbox import resolve_image as resolve

    return resolve(name)


def image_catalog() -> dict[str, ImageSpec]:
    """The catalog's images by name, in manifest order."""
    from ..sandbox import load_catalog

    return load_catalog()


def image_statuses() -> list[ImageStatus]:
    """Every catalog image with its build status on the engine. Blocking: run it in a thread."""
    from ..sandbox import list_images

    return list_images()


def build_image(name: str, on_progress: Progress | None = None, *, nocache: bool = False) -> ImageStatus:
    """Build catalog image `name`, its lines to `on_progress`. Blocking: run it in a thread."""
    from ..sandbox import build_image as build

    return build(name, on_progress, nocache=nocache)


def build_project_image(folder: str | os.PathLike[str], *, project_id: str, name: str,
                        on_progress: Progress | None = None, nocache: bool = False) -> ProjectImageBuild:
    """Build the project's own image (only on a person's command). Blocking: run it in a thread."""
    from ..sandbox import build_project_image as build

    return build(folder, project_id=project_id, name=name, on_progress=on_progress, nocache=nocache)


# a project's MCP servers ------------------------------------------------------------------------------
def project_mcp_servers(folder: str | os.PathLike[str]) -> list[ServerEntry]:
    """The project's servers from `.agent-desk/mcp.json` ([] when there is none)."""
    from ..mcp_client import read_project_servers

    return read_project_servers(folder)


def grant_mcp_server(settings: dict[str, Any], entry: ServerEntry, *, revoke: bool = False) -> dict[str, Any]:
    """The project's `settings` with the relaxation `entry` asks for granted (bound to it as it is now), or
    revoked."""
    from ..mcp_client import grant

    return grant(settings, entry, revoke=revoke)
