"""What a project's settings say to its runtime: the keys it reads, its tool profile and how long its approvals
wait."""

from __future__ import annotations

from ..config import Settings
from ..core import TOOL_PROFILES, ConfigError, ProjectInfo, ProjectSettings

DEFAULT_PROFILE = ProjectSettings.model_fields["tool_profile"].default  # "coding"
# what a project offers the model, how long its approvals wait, the person's hooks -----------------------
# Approvals the project settings held before consent.json: read until the first approval of their kind.
HOOKS_GRANT_KEY = "hooks_grant_digest"  # the sha256 of the project's hooks file as the person granted it
MCP_GRANTS_KEY, MCP_GRANT_DIGESTS_KEY = "mcp_grants", "mcp_grant_digests"  # name -> relaxation, name -> digest


def project_profile(project: ProjectInfo, asked: str | None = None) -> str:
    """The tool profile: the one asked for (CLI), else the project's, else "coding"; an unknown one is a
    ConfigError that names the known ones."""
    profile = asked or ProjectSettings.of(project.settings).tool_profile or DEFAULT_PROFILE
    if profile not in TOOL_PROFILES:
        raise ConfigError(f"unknown tool profile {profile!r} in the project {project.name!r}",
                          hint=f"choose one of {', '.join(TOOL_PROFILES)} in the project settings")
    return str(profile)


def approval_expiry(settings: Settings, project: ProjectInfo) -> float | None:
    """Seconds an approval waits before it is denied (expired), or None: it waits until answered."""
    value = ProjectSettings.of(project.settings).approval_expiry_s
    if value is None:
        value = settings.approval_expiry_s
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"the approval expiry {value!r} of the project {project.name!r} is not a number of seconds",
                          hint="set it again in the project settings (0: approvals wait)")
    return float(value) if value else None
