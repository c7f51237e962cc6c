"""create_sandbox: the sandbox a project asked for (Docker by default, local only when chosen)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core import Sandbox, SandboxError
from ._config import SandboxConfig
from ._local import LocalSandbox
from .docker import DockerSandbox


def create_sandbox(
    project: Any = None,
    *,
    project_id: str | None = None,
    folder: str | None = None,
    config: SandboxConfig | None = None,
    lease_dir: str = "",
) -> Sandbox:
    """The sandbox a project asked for. `project` is a ProjectInfo (id, path, image, settings) or any
    object/mapping with those; Docker is the default, and LocalSandbox only when settings say
    sandbox="local" (or config.kind == "local"): it is never a silent fallback. `lease_dir`: where this desk
    holds its containers' leases (see docker/_leases.py)."""
    if project is not None:
        get = project.get if isinstance(project, Mapping) else lambda k, d=None: getattr(project, k, d)
        project_id = project_id or get("id")
        folder = folder or get("path")
        if config is None:
            config = SandboxConfig.from_settings(get("settings") or {}, image=get("image"))
    config = config or SandboxConfig()
    if not project_id or not folder:
        raise SandboxError("a sandbox needs a project id and a project folder")
    if config.kind == "local":
        return LocalSandbox(folder)
    if lease_dir:  # the desk's processes hold their containers' leases there (a crash's orphans are swept)
        config = replace(config, lease_dir=lease_dir)
    return DockerSandbox(project_id, folder, config)
