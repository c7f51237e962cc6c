"""What the front ends (the window and the CLI) reach of the parts below the runtime without a project's
runtime: the built-in tools, the audit query, export and offline export check, the Docker engine's ping and
images, the workspace's description and the MCP configuration's checks and grants."""

# Each function imports its part when called: the store, the sandbox and the MCP client cost seconds to
# import, and the window is shown (or `agent-desk --help` answers) before any of them is needed.

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..core import AgentDeskError, Tool, ToolCallRecord

if TYPE_CHECKING:
    from ..mcp_client import ServerEntry
    from ..sandbox import ImageSpec, ImageStatus, ProjectImageBuild, ProjectImageSource
    from ..store import AuditQuery, VerifyResult
    from ..store import SqlStore as SqlStore  # the type a front end's store has, re-exported by the runtime

Progress = Callable[[Any], None]  # a build's log line, called on the build's thread


def front_end_type(name: str) -> type:
    """A type the runtime's face names for a front end's annotations (SqlStore), imported when first asked for:
    the runtime's module `__getattr__`."""
    if name == "SqlStore":
        from ..store import SqlStore

        return SqlStore
    raise AttributeError(f"module 'desktop_app.runtime' has no attribute {name!r}")


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


def verify_audit_export(path: str | os.PathLike[str], trusted_keys: Iterable[str] = ()) -> VerifyResult:
    """Check a signed audit export offline (its signatures, the signed head, the chain it holds)."""
    from ..store import verify_export

    return verify_export(path, trusted_keys)


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
def resolve_image(name: str) -> str:
    """The image tag for a catalog name or a Docker reference; a malformed one is a ConfigError."""
    from ..sandbox import resolve_image as resolve

    return resolve(name)


def list_images() -> list[ImageStatus]:
    """The catalog's images and whether each is built (asks Docker)."""
    from ..sandbox import list_images as _list_images

    return _list_images()


def load_catalog() -> dict[str, ImageSpec]:
    """The catalog of images that can be built (a file: works without Docker)."""
    from ..sandbox import load_catalog as _load_catalog

    return _load_catalog()


def build_image(name: str, on_progress: Progress | None = None, *, nocache: bool = False,
                cancel: Any = None) -> ImageStatus:
    """Build catalog image `name`, its lines to `on_progress`; a BuildCancel's cancel() stops it."""
    from ..sandbox import build_image as _build_image

    return _build_image(name, on_progress=on_progress, nocache=nocache, cancel=cancel)


def find_project_image(folder: str | os.PathLike[str]) -> ProjectImageSource | None:
    """The project's own image file (a Dockerfile or a devcontainer), or None."""
    from ..sandbox import find_project_image as _find_project_image

    return _find_project_image(folder)


def project_image_files(folder: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Every image file of the project, each with whether it is used and why."""
    from ..sandbox import project_image_files as _files

    return _files(folder)


def project_image_digest(folder: str | os.PathLike[str], source: ProjectImageSource) -> str:
    from ..sandbox import project_image_digest as _project_image_digest

    return _project_image_digest(folder, source)


def project_image_tag(project_id: str, name: str, digest: str) -> str:
    from ..sandbox import project_image_tag as _project_image_tag

    return _project_image_tag(project_id, name, digest)


def build_project_image(folder: str | os.PathLike[str], *, project_id: str, name: str,
                        on_progress: Progress | None = None, nocache: bool = False,
                        cancel: Any = None) -> ProjectImageBuild:
    """Build the project's own image (only on a person's command); a BuildCancel's cancel() stops it."""
    from ..sandbox import build_project_image as _build_project_image

    return _build_project_image(folder, project_id=project_id, name=name, on_progress=on_progress,
                                       nocache=nocache, cancel=cancel)


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


def build_cancel() -> Any:
    """A Cancel for one image build (BuildCancel): its cancel() from any thread stops the build for real."""
    from ..sandbox import BuildCancel

    return BuildCancel()
