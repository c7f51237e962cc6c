"""The hardened Docker sandbox: DockerSandbox (one long-lived container per project), the in-container
helper's channel and archive, the processes it attaches to, and the clean-up of orphan containers."""

from ._leases import remove_crashed
from ._sandbox import DockerSandbox, container_name, folder_owner, remove_orphans

__all__ = ["DockerSandbox", "container_name", "folder_owner", "remove_crashed", "remove_orphans"]
