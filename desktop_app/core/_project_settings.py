"""The keys of a project's settings (`ProjectInfo.settings`), each declared once with its default: what the
runtime, the MCP hub, the sandbox and the project dialog read. The stored form stays a plain dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ProjectSettings(BaseModel):
    """A project's settings, typed. Read one with `ProjectSettings.of(project.settings)`: a key not stored
    gets its default here, and keys this class does not declare are kept (the consent records among them:
    the hooks grant and the MCP grants)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    # the agent: its template, its tools and how long its approvals wait
    template: str | None = None
    """The agent template's name (built in, the user's or the project's); None: the default template."""
    tool_profile: str = "coding"
    """The tool profile offered to the model: one of TOOL_PROFILES."""
    disabled_tools: list[str] = Field(default_factory=list)
    """Built-in tool names switched off for this project."""
    approval_expiry_s: float | None = None
    """Seconds an approval waits before it is denied; 0: approvals wait; None: the user's default
    (Settings.approval_expiry_s)."""

    # MCP servers: the switches (the grants are consent records, kept as undeclared keys)
    mcp_disabled_servers: list[str] = Field(default_factory=list)
    """MCP server names switched off for this project."""
    mcp_disabled_tools: list[str] = Field(default_factory=list)
    """MCP tools switched off, by their desk name (mcp__server__tool)."""

    # the sandbox: these defaults are SandboxConfig's hardened ones (a test keeps them equal)
    sandbox: str = "docker"
    """The sandbox kind: docker, or local (tools on this machine, unsafe; chosen explicitly)."""
    network: bool | str = False
    """Network access from the sandbox: False (none), True (full, bridge) or "allowlist" (only what
    network_allow lists, through the desk's proxy; anything else asks)."""
    network_allow: list[str] = Field(default_factory=list)
    """The allowlist mode's domain patterns ("pypi.org", "*.example.org:443", "10.0.0.5") and presets
    ("@python", "@node", "@debian", "@github")."""
    memory: int | float | str = "2g"
    """The memory limit: bytes, or a size like "2g" or "512m"."""
    cpus: float = 2.0
    """The CPU limit."""
    pids: int = 256
    """The process limit."""
    workspace_ro: bool = False
    """Mount the workspace read-only (also spelled workspace_readonly)."""
    workspace_readonly: bool = False
    """The long spelling of workspace_ro; workspace_ro wins when both are set."""
    tmp_size: int | float | str = "512m"
    """The size of the sandbox's /tmp (a tmpfs)."""
    home_size: int | float | str = "512m"
    """The size of the sandbox user's home (a tmpfs)."""
    uid: int | None = None
    """The user commands run as; None: the owner of the project folder (1000 when that is root)."""
    git_commit: bool = False
    """Offer the agent the git_commit tool: the desk commits on the host, with git's configuration, hooks and
    helpers shut out, each commit judged like a write. .git stays read-only in the sandbox either way."""
    git_writable: bool = False
    """The old "let the agent commit" (.git read-write in the sandbox), retired: it is read as git_commit."""
    keep_running: bool = False
    """Leave the container running when the project closes, for a faster next start."""
    idle_limit_s: float = 7 * 24 * 3600.0
    """A container stopped this long is removed as an orphan."""
    workspace: str = "auto"
    """How the workspace reaches the container: auto (synced on a remote engine), synced or bind."""
    runtime: str = ""
    """The container runtime: "" (the engine's default, runc) or "runsc" (gVisor, registered with the engine)."""

    # the project's own image
    project_image: dict[str, str] | None = None
    """The file and digest the project's own image was built from: {"source": relative path, "digest": sha256}."""

    @classmethod
    def of(cls, settings: Mapping[str, Any] | None) -> ProjectSettings:
        """A typed view of stored settings, taken as stored (not checked here: the runtime and the sandbox
        check what they use, with their own messages); an absent key reads as its default."""
        return cls.model_construct(**dict(settings or {}))
