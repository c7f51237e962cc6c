"""The containers a crashed desk left: each desk process holds a lease on the containers it uses (in the desk's
data folder), and at start the running ones nobody holds are removed; one another live desk process uses is
never touched (see sandbox/docker/_leases.py)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from ..config import data_dir

log = logging.getLogger(__name__)


def lease_dir() -> Path:
    """Where this desk's processes hold their sandbox containers' leases."""
    return data_dir() / "sandbox-leases"


def leased_sandbox(project: Any) -> Any:
    """The sandbox a project asked for (sandbox.create_sandbox), its container leased by this process."""
    from ..sandbox import create_sandbox

    return create_sandbox(project, lease_dir=str(lease_dir()))


def remove_crashed_containers(client: Any = None) -> list[str]:
    """Remove the running containers of this desk that no live desk process holds (a crash's). Blocking."""
    from ..sandbox import connect, remove_crashed

    directory = lease_dir()
    if not directory.is_dir():
        return []
    return remove_crashed(client if client is not None else connect(), str(directory))


async def sweep_crashed_containers() -> list[str]:
    """remove_crashed_containers off the event loop; a failure (no engine) is logged, never raised: a start
    is never stopped by its clean-up."""
    try:
        removed = await asyncio.to_thread(remove_crashed_containers)
    except Exception as exc:
        log.warning("could not sweep the containers a crash left: %s", exc)
        return []
    if removed:
        log.info("removed %d sandbox container(s) a crashed desk left: %s", len(removed), ", ".join(removed))
    return removed
