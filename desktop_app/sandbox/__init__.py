"""Where tools run: the hardened DockerSandbox (default), the opt-in LocalSandbox (unsandboxed), the
per-project SandboxConfig, and the image catalog. docker is imported lazily. The Sandbox protocol they
implement lives in core, beside the tools that consume it."""

from ._client import connect
from ._config import SandboxConfig, workspace_where
from ._docker import DockerSandbox, container_name, folder_owner, remove_orphans
from ._factory import create_sandbox
from ._images import (
    ImageSpec,
    ImageStatus,
    build_base_image,
    build_image,
    image_name_for_tag,
    images_dir,
    list_images,
    load_catalog,
    resolve_image,
)
from ._local import LocalSandbox
from ._project_image import (
    ProjectImageBuild,
    ProjectImageSource,
    build_project_image,
    find_project_image,
    project_image_digest,
    project_image_tag,
    refuse_loosening,
)

__all__ = [
    "DockerSandbox",
    "ImageSpec",
    "ImageStatus",
    "LocalSandbox",
    "ProjectImageBuild",
    "ProjectImageSource",
    "SandboxConfig",
    "build_base_image",
    "build_image",
    "build_project_image",
    "connect",
    "container_name",
    "create_sandbox",
    "find_project_image",
    "folder_owner",
    "image_name_for_tag",
    "images_dir",
    "list_images",
    "load_catalog",
    "project_image_digest",
    "project_image_tag",
    "refuse_loosening",
    "remove_orphans",
    "resolve_image",
    "workspace_where",
]
