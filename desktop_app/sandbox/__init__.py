"""Where tools run: the hardened DockerSandbox (default), the opt-in LocalSandbox (unsandboxed), the
per-project SandboxConfig, and the image catalog. docker is imported lazily. The Sandbox protocol they
implement lives in core, beside the tools that consume it.

Rooms: docker/ (the container sandbox), exec/ (its transport without python3), sync/ (its synced
workspace), images/ (the catalog and a project's own image), helper/ (runs in the container). What
several rooms share stays here: the engine client, the exec stream's frames, the config, the control
mounts and the helper's operations. The host's git, shut in, is here too (_host_git.py): it reads the
project's .git as the control mounts guard it."""

from ._client import ENGINE_HINT, connect
from ._config import SandboxConfig, workspace_where
from ._engine_link import RUNSC_HINT, engine_link
from ._factory import create_sandbox
from ._host_git import ProjectGit
from ._local import LocalSandbox
from .docker import DockerSandbox, container_name, folder_owner, remove_crashed, remove_orphans
from .images import (
    BaseFacts,
    BasePlan,
    BuildCancel,
    ImageSpec,
    ImageStatus,
    ProjectImageBuild,
    ProjectImageSource,
    base_plan,
    build_base_image,
    build_image,
    build_project_image,
    find_project_image,
    image_name_for_tag,
    images_dir,
    list_images,
    load_catalog,
    plan_base,
    project_image_digest,
    project_image_files,
    project_image_tag,
    refuse_loosening,
    resolve_image,
)

__all__ = [
    "ENGINE_HINT",
    "RUNSC_HINT",
    "BaseFacts",
    "BasePlan",
    "BuildCancel",
    "DockerSandbox",
    "ImageSpec",
    "ImageStatus",
    "LocalSandbox",
    "ProjectGit",
    "ProjectImageBuild",
    "ProjectImageSource",
    "SandboxConfig",
    "base_plan",
    "build_base_image",
    "build_image",
    "build_project_image",
    "connect",
    "container_name",
    "create_sandbox",
    "engine_link",
    "find_project_image",
    "folder_owner",
    "image_name_for_tag",
    "images_dir",
    "list_images",
    "load_catalog",
    "plan_base",
    "project_image_digest",
    "project_image_files",
    "project_image_tag",
    "refuse_loosening",
    "remove_crashed",
    "remove_orphans",
    "resolve_image",
    "workspace_where",
]
