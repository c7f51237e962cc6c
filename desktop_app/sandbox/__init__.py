"""Where tools run: the hardened DockerSandbox (default), the opt-in
LocalSandbox, per-project SandboxConfig, and the image catalog. docker is imported lazily.
The Sandbox protocol itself lives in core, beside the tools that consume it; it is re-exported here."""

from ..core import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    WORKSPACE,
    BackgroundLogs,
    ExecResult,
    FileStat,
    GrepMatch,
    OutputCallback,
    Sandbox,
    SandboxDescription,
)
from ._client import connect
from ._config import SandboxConfig, parse_size
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
)
from ._local import LocalSandbox

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_READ_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "WORKSPACE",
    "BackgroundLogs",
    "DockerSandbox",
    "ExecResult",
    "FileStat",
    "GrepMatch",
    "ImageSpec",
    "ImageStatus",
    "LocalSandbox",
    "OutputCallback",
    "Sandbox",
    "SandboxConfig",
    "SandboxDescription",
    "build_base_image",
    "build_image",
    "connect",
    "container_name",
    "create_sandbox",
    "image_name_for_tag",
    "images_dir",
    "list_images",
    "load_catalog",
    "parse_size",
    "remove_orphans",
]
