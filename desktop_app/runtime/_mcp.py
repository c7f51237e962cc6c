"""A project's MCP servers: their configuration, the secrets their headers name and the sandbox beside the
project's that a networked server runs in."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import Settings, keyring_available
from ..core import ProjectInfo, Sandbox, SandboxError

if TYPE_CHECKING:
    from ..mcp_client import ServerEntry

log = logging.getLogger(__name__)

# (the project's sandbox, an MCP server's name) -> a sandbox with network beside it, not started
CompanionFactory = Callable[[Sandbox, str], Sandbox]
# (the companion's list, an MCP server's name) -> the gate that asks and records for that server's connections
ServerGate = Callable[[Any, str], Any]
MCP_KEYRING_SERVICE = "agent-desk-mcp"
# MCP servers ---------------------------------------------------------------------------------------------
def mcp_config(settings: Settings, project: ProjectInfo) -> McpConfig:
    """The project's and the user's servers, whether each may start (the person's consent), and the secrets
    their headers resolve to (for the redactor). Blocking (files, the keyring): call it off the event loop."""
    from ..mcp_client import header_secrets, load_servers
    from ._consent import mcp_consented

    entries = load_servers(project.path, settings.mcp_servers)
    consented = mcp_consented(project)
    return McpConfig(entries, consented, header_secrets(entries, consented, mcp_secret))


@dataclass(frozen=True, slots=True)
class McpConfig:
    entries: list[ServerEntry]
    consented: Callable[[ServerEntry], bool]  # the person approved it as it is (or it asks for nothing)
    secrets: list[str]


def mcp_secret(kind: str, name: str) -> str | None:
    """`${env:NAME}` from the environment, `${keyring:NAME}` from the keyring service "agent-desk-mcp"."""
    if kind == "env":
        return os.environ.get(name) or None
    if not name or not keyring_available():
        return None
    import keyring

    try:
        return keyring.get_password(MCP_KEYRING_SERVICE, name) or None
    except Exception:  # a locked or broken keyring: the server fails with "has no value"
        log.warning("the keyring could not be read for the MCP secret %r", name)
        return None


def default_companion(sandbox: Sandbox, name: str, gate: ServerGate | None = None) -> Sandbox:
    """A DockerSandbox's companion, named after the server: with no network and its own proxy under the
    project's list (its connections the server's, an unlisted domain asked about like a call's; with the
    project's network off the list is empty, so every destination is asked about), never a fully open network
    unless the project's own network is fully on. `gate` makes the server's gate when the project has no proxy
    of its own (its network off)."""
    from ._network import ProjectNetworkGate

    egress = getattr(sandbox, "egress", None)
    config = getattr(sandbox, "config", None)
    problem = getattr(config, "network_problem", "")
    if problem:  # the allowlist mode with a list that cannot be read: no network, never the bridge
        raise SandboxError(f"the MCP server {name!r} needs the network: {problem}")
    if getattr(config, "network", False) is True:  # the person turned the project's network fully on
        return sandbox.companion(f"mcp-{name}", network="bridge", purpose=f"MCP server {name!r}")  # type: ignore[attr-defined]
    other = sandbox.companion(f"mcp-{name}", network="allowlist", purpose=f"MCP server {name!r}")  # type: ignore[attr-defined]
    if other.egress is None:
        return other
    project_gate = getattr(egress, "gate", None)
    if isinstance(project_gate, ProjectNetworkGate):
        other.egress.gate = project_gate.for_server(name)
    elif gate is not None:
        other.egress.gate = gate(other.egress.gate.allowlist(), name)
    return other
