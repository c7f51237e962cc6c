"""The synced workspace (a remote engine): the project folder copied to and from volumes on the engine by
digest, a part DockerSandbox holds; the plan that decides each path, and the volumes and sync container."""

from ._synced import SyncedWorkspace
from ._volumes import remove_project_volumes

__all__ = ["SyncedWorkspace", "remove_project_volumes"]
