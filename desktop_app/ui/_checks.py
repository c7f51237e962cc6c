"""What the agent needs before it can run (an API key, a Docker engine), said in the window's banner
with the fix, and each project's sandbox (engine, folder, image), checked when it is opened or saved and said
in the status bar in plain words with the button that fixes it."""

from __future__ import annotations

import asyncio
import dataclasses
import html
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox

from ..core import AgentDeskError, ProjectInfo, SandboxError
from ..doctor import AMBER, RED, SandboxStatus, check_project_sandbox
from ..runtime import ping_docker
from ._build_log import BuildLogDialog, show_build_log
from ._builds import image_builds
from ._mainwindow import MainWindow
from ._tasks import BackgroundTasks

_BANNER_WORDS = {"build": "Build image", "pick": "Project settings…", "fix": "How to fix…"}


def use_project_image(project: ProjectInfo, built: Any) -> ProjectInfo:
    """The project with its own image (just built) as its sandbox image, and the digest it was built from."""
    settings = {**(project.settings or {}), "project_image": {"source": built.source.path, "digest": built.digest}}
    return dataclasses.replace(project, image=built.tag, settings=settings)


class SetupChecks(QObject):
    """The API key and Docker checks, and each project's sandbox check in the status bar."""

    dockerChecked = Signal(bool, str)
    projectChecked = Signal(str, object)  # project id, SandboxStatus

    def __init__(self, window: MainWindow, *, current_project: Callable[[], ProjectInfo | None],
                 set_key: Callable[[], Any], retry_docker: Callable[[], Any], open_history: Callable[[], Any],
                 run_checks: Callable[[], Any] = lambda: None,
                 edit_project: Callable[[str], Any] = lambda _pid: None,
                 save_project: Callable[[ProjectInfo], Awaitable[Any]] | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.docker_ok: bool | None = None
        self._current_project = current_project
        self._set_key = set_key
        self._retry_docker = retry_docker
        self._open_history = open_history
        self._run_checks = run_checks  # the doctor's checks, offered beside each first-run problem
        self._edit_project = edit_project  # opens a project's settings (Pick…)
        self._save_project = save_project  # stores a project whose image was just built
        self._tasks = BackgroundTasks(self._failed)
        self.statuses: dict[str, SandboxStatus] = {}  # project id -> its last check
        self.build_log: BuildLogDialog | None = None

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
        ok, message = await asyncio.get_running_loop().run_in_executor(None, ping_docker)
        self.docker_ok = ok
        if ok:
            self.window.banner.clear_item("docker")
            project = self._current_project()
            if project is not None:  # awaited: a screenshot or a Retry shows the project's real state
                await self.check_project(project)
            else:  # no project, so no image to call ready
                self.window.status.show_check("", f"{message} answers: add a project")
        else:
            self.window.status.show_check(RED, "Docker engine not running", message, "retry", self._retry_docker)
            self.window.banner.set_item(
                "docker",
                "<b>Docker: not available</b> — start Docker (or set DOCKER_HOST) and retry, or choose the "
                "local (unsandboxed) sandbox in a project's settings. History and the image catalog work "
                f"without it.<br><small>{html.escape(message[:200])}</small>",
                [("Retry", self._retry_docker), ("Check setup…", self._run_checks), ("History…", self._open_history)])
        self.dockerChecked.emit(ok, message)
        return ok

    # a project's sandbox ------------------------------------------------------------------------------
    def show_project_sandbox(self, project: ProjectInfo) -> None:
        """The sandbox a project's sessions will use, before one runs: checked (engine, folder, image) once the
        engine has been asked for; never "ready" before the check says so."""
        if self.docker_ok is None:  # the engine's check has not run (or not yet): it checks the project after
            self.window.status.show_check(AMBER, f"Checking the sandbox: {project.image}")
            return
        self._tasks.spawn(self.check_project(project))

    def _in_view(self, project: ProjectInfo) -> bool:
        current = self._current_project()
        return current is None or current.id == project.id

    async def check_project(self, project: ProjectInfo) -> SandboxStatus:
        """Check the project's sandbox on a worker thread; show it when the project is still the one in view."""
        if self._in_view(project):
            self.window.status.show_check(AMBER, f"Checking the sandbox: {project.image}")
        status = await asyncio.get_running_loop().run_in_executor(
            None, check_project_sandbox, project.path, project.image, dict(project.settings or {}))
        self.statuses[project.id] = status
        if self._in_view(project):
            self._show(project, status)
        self.projectChecked.emit(project.id, status)
        return status

    def _show(self, project: ProjectInfo, status: SandboxStatus) -> None:
        """The status bar's line and button; a red one also as a banner row with its fix and Check again."""
        act = self._action(project, status)
        self.window.status.show_check(status.level, status.text, status.detail, status.action, act)
        if status.level != RED:
            self.window.banner.clear_item("sandbox")
            return
        actions = [(_BANNER_WORDS[status.action], act)] if status.action in _BANNER_WORDS else []
        actions.append(("Check again", lambda: self._tasks.spawn(self.check_project(project))))
        self.window.banner.set_item(
            "sandbox", f"<b>Sandbox: {html.escape(status.text)}</b><br><small>{html.escape(status.detail)}</small>",
            actions)

    def _action(self, project: ProjectInfo, status: SandboxStatus) -> Callable[[], Any]:
        """What the status bar's button (and the banner's) does for this status."""
        if status.action == "build":
            return lambda: self._tasks.spawn(self.build(project, status))
        if status.action == "pick":
            return lambda: self._edit_project(project.id)
        if status.action == "fix":
            return lambda: self.show_fix(project, status)
        return lambda: self._tasks.spawn(self.check_project(project))  # "retry"

    def after_error(self, exc: BaseException) -> None:
        """An error in the window: a sandbox's failure is checked again, so its fix is offered as a button."""
        project = self._current_project()
        if isinstance(exc, SandboxError) and project is not None and self.docker_ok is not None:
            self._tasks.spawn(self.check_project(project))

    def _failed(self, exc: BaseException) -> None:
        text = exc.user_message() if isinstance(exc, AgentDeskError) else f"{type(exc).__name__}: {exc}"
        self.window.banner.set_item("sandbox", f"<b>Sandbox:</b> {html.escape(text)}",
                                    [("Check setup…", self._run_checks)])

    # the actions ------------------------------------------------------------------------------------
    def show_fix(self, project: ProjectInfo, status: SandboxStatus) -> QMessageBox:
        """What to run to fix it, in words that can be selected and copied, and Check again."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Fix the sandbox", status.text, parent=self.window)
        box.setInformativeText(f"{status.detail}\n\nTo fix it: {status.fix}")
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        again = box.addButton("Check again", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Close)
        again.clicked.connect(lambda: self._tasks.spawn(self.check_project(project)))
        box.finished.connect(box.deleteLater)
        box.open()
        return box

    async def build(self, project: ProjectInfo, status: SandboxStatus) -> ProjectInfo:
        """Build what the check asked for (a catalog image, or the project's own) with its log live, its
        elapsed time and Cancel; the project's own image becomes its sandbox image. Only a click gets here."""
        from ..runtime import build_image, build_project_image

        own = status.build == "project"
        if own and not await self._arguments_agreed(project):
            return project
        if own:
            build = image_builds().start(
                f"project:{project.id}", f"Building the project's image for {project.name}",
                lambda say, cancel: build_project_image(project.path, project_id=project.id, name=project.name,
                                                        on_progress=say, cancel=cancel),
                lambda built: f"Built {built.tag}")
        else:
            build = image_builds().start(
                f"image:{status.build}", f"Building {status.build}",
                lambda say, cancel: build_image(status.build, on_progress=say, cancel=cancel),
                lambda _built: f"Built {status.build}")
        self.build_log = show_build_log(build, self.window)
        built = await asyncio.shield(build.future)
        if own:
            project = use_project_image(project, built)
            if self._save_project is not None:
                await self._save_project(project)
        await self.check_project(project)
        return project

    async def _arguments_agreed(self, project: ProjectInfo) -> bool:
        """The build arguments the project's devcontainer passes (a proxy, a token) are shown before the build
        starts, never passed silently: Build goes on only when the person says so."""
        from ..runtime import find_project_image

        try:
            source = await asyncio.to_thread(find_project_image, project.path)
        except AgentDeskError:
            return True  # the build says what is wrong with the file
        if source is None or not source.build_args:
            return True
        args = "\n".join(f"  {k}={v}" for k, v in sorted(source.build_args.items()))
        box = QMessageBox(QMessageBox.Icon.Question, "Build the project's image",
                          f"{source.path} passes these build arguments to the build:", parent=self.window)
        box.setInformativeText(f"{args}\n\nThey are visible to every step of its Dockerfile.")
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.setObjectName("BuildArgumentsBox")
        build = box.addButton("Build", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        answered: asyncio.Future = asyncio.get_running_loop().create_future()
        box.finished.connect(lambda _code: answered.done() or answered.set_result(box.clickedButton() is build))
        box.open()
        try:
            return await answered
        finally:
            box.deleteLater()

    def show_sandbox(self, agent: Any) -> None:
        """The running sandbox as it describes itself: engine, image, network, and UNSANDBOXED if local."""
        try:
            d = agent.sandbox.describe()
        except Exception:
            return
        label = "running" if not d.unsandboxed else "local"
        self.window.status.set_sandbox(label, d.image or "", d.network or "none", unsafe=d.unsandboxed,
                                       where=d.where())
