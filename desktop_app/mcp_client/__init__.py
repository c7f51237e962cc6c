"""MCP servers for a project: their configuration, the SDK client over a sandbox channel, the host or HTTP,
the hub that keeps them running, and their tools as desk tools under the same policy and audit."""

from ._config import PROJECT_CONFIG, ServerConfig, ServerEntry, load_servers, parse_servers, read_project_servers
from ._hub import HubPlaces, McpHub, header_secrets
from ._server import McpServerError
from ._tool import McpTool

__all__ = [
    "PROJECT_CONFIG",
    "HubPlaces",
    "McpHub",
    "McpServerError",
    "McpTool",
    "ServerConfig",
    "ServerEntry",
    "header_secrets",
    "load_servers",
    "parse_servers",
    "read_project_servers",
]
