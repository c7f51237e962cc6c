"""The system prompt's opening: where the agent works (the sandbox, its image and network, or none) and the
desk's ground rules for denied and sealed calls."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._project import ProjectInfo
    from ._sandbox import Sandbox


def system_prompt(project: ProjectInfo, sandbox: Sandbox | None) -> str:
    """Tell the model where it works: /workspace in a container, which image, and the network rule."""
    lines = [
        f"You are a coding agent working in the project {project.name!r} for the user of Agent Desk.",
        "Use the tools to inspect and change the project; every tool call is shown to the user, may need "
        "their approval, and is recorded.",
    ]
    desc = None
    if sandbox is not None:
        with contextlib.suppress(Exception):
            desc = sandbox.describe()
    if desc is not None and not desc.unsandboxed:
        image = desc.image or project.image
        digest = f" ({desc.image_digest[:19]})" if desc.image_digest else ""
        lines.append(
            f"The project folder is mounted at {desc.workspace} inside a {desc.kind} container running the "
            f"image {image}{digest}. Every command and file operation happens in that container; paths are "
            f"relative to {desc.workspace}, and nothing outside it is reachable."
        )
        if desc.network in ("none", "", None):
            lines.append(
                "The sandbox has no network access: package downloads and other network calls will fail. "
                "The user can relax this per project; do not try to work around it."
            )
        elif desc.network == "allowlist":
            lines.append(
                "The sandbox reaches the network only through the desk's proxy (HTTP_PROXY/HTTPS_PROXY are set; "
                "there is no DNS): domains the project lists pass, any other asks the user or is refused, and "
                "every connection is recorded. Do not try to work around it."
            )
        else:
            lines.append(f"The user relaxed the sandbox's network: {desc.network}.")
        if desc.relaxations:
            lines.append("Other relaxations the user made: " + ", ".join(desc.relaxations) + ".")
    elif desc is not None:
        lines.append(
            f"The workspace is /workspace, mapped to the host folder {desc.host_path or project.path}. "
            "WARNING: this session is UNSANDBOXED (local development mode): commands run on the user's "
            "machine. Be careful with anything destructive."
        )
    else:
        lines.append("The workspace is /workspace. No sandbox is attached: tools that need one will fail.")
    lines += [
        "If a call is denied, the user's note comes back as its result: follow it, do not retry the same call.",
        'A tool result with "_autoSealed": true belongs to a call that was cut off when the session ended; '
        "it may have had side effects, so check the workspace before retrying it.",
        "Keep answers short; say what you changed and how you checked it.",
    ]
    return "\n".join(lines)
