"""What the agent needs before it can run (an API key, a Docker engine), said in the window's banner
with the fix, and the sandbox a session uses, said in the status bar."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from ..core import AgentDeskError, ProjectInfo
from ._mainwindow import MainWindow


def _ping_docker() -> tuple[bool, str]:
    """Connect to the engine and ask its version (on a worker thread: the docker SDK blocks)."""
    from ..sandbox import connect

    try:
        client = connect()
    except AgentDeskError as exc:
        return False, str(exc)
    try:
        return True, f"Docker {client.version().get('Version', '?')}"
    except Exception as exc:
        return False, str(exc).splitlines()[0][:200]
    finally:
        client.close()


class SetupChecks(QObject):
    """The API key and Docker checks, and the sandbox line of the status bar."""

    dockerChecked = Signal(bool, str)

    def __init__(self, window: MainWindow, *, current_project: Callable[[], ProjectInfo | None],
                 set_key: Callable[[], Any], retry_docker: Callable[[], Any], open_history: Callable[[], Any],
                 run_checks: Callable[[], Any] = lambda: None) -> None:
        super().__init__(window)
        self.window = window
        self.docker_ok: bool | None = None
        self._current_project = current_project
        self._set_key = set_key
        self._retry_docker = retry_docker
        self._open_history = open_history
        self._run_checks = run_checks  # the doctor's checks, offered beside each first-run problem

    def check_api_key(self, key_source: str | None) -> bool:
        if key_source:
            self.window.banner.clear_item("api_key")
            return True
        self.window.banner.set_item(
            "api_key",
            "<b>No API key.</b> The agent cannot answer until you set one (kept in the system keyring). "
            "History and the image catalog work without it.",
            [("Set API key…", self._set_key), ("Check setup…", self._run_checks)])
        return False

    async def check_docker(self) -> bool:
        """Ping the engine on a worker thread: the docker SDK is imported and connected off the GUI thread."""
        ok, message = await asyncio.get_running_loop().run_in_executor(None, _ping_docker)
        self.docker_ok = ok
        if ok:
            self.window.banner.clear_item("docker")
            project = self._current_project()
            if project is not None:
                self.show_project_sandbox(project)
            else:
                self.window.status.set_sandbox("ready", network="none")
        else:
            self.window.status.set_sandbox("unavailable")
            self.window.banner.set_item(
                "docker",
                "<b>Docker: not available</b> — start Docker (or set DOCKER_HOST) and retry, or choose the "
                "local (unsandboxed) sandbox in a project's settings. History and the image catalog work "
                f"without it.<br><small>{html.escape(message[:200])}</small>",
                [("Retry", self._retry_docker), ("Check setup…", self._run_checks), ("History…", self._open_history)])
        self.dockerChecked.emit(ok, message)
        return ok

    def show_project_sandbox(self, project: ProjectInfo) -> None:
        """The sandbox a project's sessions will use, before one runs."""
        if self.docker_ok is False:
            return
        net = "on" if (project.settings or {}).get("network") else "none"
        status = "ready" if self.docker_ok else "checking…"
        unsafe = (project.settings or {}).get("sandbox") == "local"
        from ..sandbox import workspace_where

        self.window.status.set_sandbox(status, project.image, net, unsafe=unsafe,
                                       where=workspace_where(project.settings))

    def show_sandbox(self, agent: Any) -> None:
        """The running sandbox as it describes itself: engine, image, network, and UNSANDBOXED if local."""
        try:
            d = agent.sandbox.describe()
        except Exception:
            return
        label = "running" if not d.unsandboxed else "local"
        self.window.status.set_sandbox(label, d.image or "", d.network or "none", unsafe=d.unsandboxed,
                                       where=d.where())
