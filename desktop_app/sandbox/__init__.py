"""Where tools run: the hardened DockerSandbox (default), the opt-in LocalSandbox (unsandboxed), the
per-project SandboxConfig, and the image catalog. docker is imported lazily. The Sandbox protocol they
implement lives in core, beside the tools that consume it."""

from ._client import connect
from ._config import SandboxConfig, workspace_where
from ._docker import DockerSandbox, container_name, remove_orphans
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

__all__ = [
    "DockerSandbox",
    "ImageSpec",
    "ImageStatus",
    "LocalSandbox",
    "SandboxConfig",
    "build_base_image",
    "build_image",
    "connect",
    "container_name",
    "create_sandbox",
    "image_name_for_tag",
    "images_dir",
    "list_images",
    "load_catalog",
    "remove_orphans",
    "resolve_image",
    "workspace_where",
]
