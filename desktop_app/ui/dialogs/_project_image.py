"""The project settings dialog's sandbox image section: the image picker (the catalog with each image's build
status, the project's own Dockerfile or devcontainer, or any local tag), its Build with progress, elapsed time,
Cancel and log, and the flows that read the catalog and build an image as one of the window's builds."""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QComboBox, QLabel, QPlainTextEdit, QProgressBar, QPushButton

from ...core import DEFAULT_IMAGE, AgentDeskError, ProjectInfo, ProjectSettings
from .._build_log import show_build_log
from .._builds import RunningBuild, elapsed_text, image_builds

log = logging.getLogger(__name__)

ImageBuilder = Callable[[str, Callable[[str], None]], Awaitable[Any]]
ProjectImageBuilder = Callable[[ProjectInfo, Callable[[str], None]], Awaitable[Any]]
PROJECT_IMAGE_PREFIX = "project image: "  # the picker's entry for the project's own Dockerfile or devcontainer


class ImageSection:
    """The image picker and its build, mixed into the project settings dialog (its widgets are the dialog's
    attributes: image, image_status, build_btn, build_log, ...). The dialog sets project, _tasks,
    _build_image and _build_project_image before `_build_image_picker`."""

    project: ProjectInfo | None
    _build_image: ImageBuilder | None
    _build_project_image: ProjectImageBuilder | None
    _tasks: Any

    def _build_image_picker(self, project: ProjectInfo | None, catalog: list[dict[str, Any]] | None,
                            default_image: str) -> None:
        self.image = QComboBox()
        self.image.setEditable(True)
        self.image.setToolTip("Pick an image from the catalog, or type any local image tag")
        for entry in catalog or []:
            self.add_catalog_entry(entry)
        self.image.setCurrentText(project.image if project else default_image)
        for tag, entry in self.catalog.items():
            if entry.get("in_use"):  # the project runs its own image: its entry, not the bare tag
                self.image.setCurrentText(tag)
        self.image_status = QLabel()
        self.image_status.setWordWrap(True)  # a project image's notices can be long
        self.build_btn = QPushButton("Build")
        self.build_btn.clicked.connect(self._build_clicked)
        self._building = False  # this dialog's own build runs
        self._followed: RunningBuild | None = None  # a build started elsewhere, shown here
        self._build_started = 0.0
        self.build_progress = QProgressBar()
        self.build_progress.setRange(0, 0)
        self.build_progress.setFormat("")
        self.build_progress.hide()
        self.cancel_build_btn = QPushButton("Cancel build")  # stops it for real: the engine ends the step it runs
        self.cancel_build_btn.clicked.connect(self.cancel_build)
        self.cancel_build_btn.hide()
        self.build_elapsed = QLabel()
        self.build_elapsed.setMinimumWidth(self.build_elapsed.fontMetrics().horizontalAdvance("elapsed 00:00:00"))
        self._build_tick = QTimer(self, interval=1000)
        self._build_tick.timeout.connect(self._show_elapsed)
        self.image_files = QLabel()  # every image file of the project, and which one is used and why
        self.image_files.setWordWrap(True)
        self.image_files.hide()
        self.build_log = QPlainTextEdit()  # the build's lines, live; its outcome at the end
        self.build_log.setReadOnly(True)
        self.build_log.setMaximumBlockCount(2000)
        self.build_log.setMaximumHeight(140)
        self.build_log.hide()
        self.image.currentTextChanged.connect(self._image_changed)


    # image catalog -----------------------------------------------------------------------------
    def add_catalog_entry(self, entry: dict[str, Any]) -> None:
        tag = entry["tag"]
        self.catalog[tag] = entry
        if self.image.findText(tag) < 0:
            self.image.addItem(tag)

    def _build_key(self, entry: dict[str, Any]) -> str:
        """What the window's builds call the entry's build (the same key the status bar's Build uses)."""
        if entry.get("project"):
            return f"project:{self.project.id if self.project else ''}"
        return f"image:{entry.get('name', entry['tag'])}"

    def running_build(self) -> RunningBuild | None:
        entry = self.catalog.get(self.image.currentText())
        return image_builds().find(self._build_key(entry)) if entry else None

    def _image_changed(self, tag: str) -> None:
        entry = self.catalog.get(tag)
        self.image_files.setVisible(bool(entry and entry.get("files")))
        if entry is None:
            self.image_status.setText("a local image tag (not in the catalog)")
            self.build_btn.setEnabled(False)
            return
        self.image_files.setText(entry.get("files", ""))
        if self.running_build() is not None and not self._building:  # started before this dialog opened
            self._follow_running()
            return
        status = entry.get("status", "unknown")
        colour = {"built": "#2f9e44", "missing": "#d4890b", "changed": "#d4890b"}.get(status, "#8a8f98")
        self.image_status.setText(
            f"<span style='color:{colour}'>● {status}</span> — {entry.get('description', '')}")
        builder = self._build_project_image if entry.get("project") else self._build_image
        self.build_btn.setEnabled(builder is not None and status not in ("building", "unreadable"))
        self.build_btn.setText("Rebuild" if status == "built" else "Build")

    def _follow_running(self) -> None:
        """A build of this entry runs (started from the status bar, or before this dialog was closed): shown
        with its elapsed time and Cancel; its log opens with Show build…"""
        build = self.running_build()
        if build is None:
            return
        self.image_status.setText(f"<span style='color:#3b82c4'>● building</span> — {html.escape(build.title)}")
        self.build_btn.setText("Show build…")
        self.build_btn.setEnabled(True)
        self._show_running(True)
        if self._followed is not build:
            self._followed = build
            build.finished.connect(self._running_ended)  # a bound slot: gone with the dialog

    def _running_ended(self, *_: Any) -> None:
        build, self._followed = self._followed, None
        self._show_running(False)
        if build is None:
            return
        entry = self.catalog.get(self.image.currentText())
        if entry is not None and self._build_key(entry) == build.key and not self._building:
            entry["status"] = "built" if build.ok else "cancelled" if build.cancel.cancelled else "failed"
            self._image_changed(self.image.currentText())

    def _show_running(self, running: bool) -> None:
        for w in (self.build_progress, self.cancel_build_btn, self.build_elapsed):
            w.setVisible(running)
        self.cancel_build_btn.setEnabled(running)
        if running:
            self._build_tick.start()
            self._show_elapsed()
        else:
            self._build_tick.stop()

    def _show_elapsed(self) -> None:
        build = self.running_build()
        self.build_elapsed.setText(f"elapsed {elapsed_text(time.monotonic() - self._build_started)}" if build is None
                                   else f"elapsed {elapsed_text(build.elapsed())}")

    def cancel_build(self) -> None:
        build = self.running_build()
        if build is not None:
            build.request_cancel()
            self.cancel_build_btn.setEnabled(False)

    def _build_clicked(self) -> None:
        build = self.running_build()
        if build is not None and not self._building:
            show_build_log(build, self)
            return
        self._tasks.spawn(self.build_selected())

    async def build_selected(self) -> bool:
        tag = self.image.currentText()
        entry = self.catalog.get(tag)
        own = bool(entry and entry.get("project"))
        if entry is None or (self._build_project_image if own else self._build_image) is None:
            return False
        self._building = True
        self._build_started = time.monotonic()
        self.build_btn.setEnabled(False)
        entry["status"] = "building"
        self._image_changed(tag)
        self._show_running(True)
        self.build_log.clear()
        self.build_log.show()
        try:
            if own and self.project is not None:
                built = await self._build_project_image(self.project, self.build_log.appendPlainText)
                entry.update(image=built.tag, digest=built.digest, source=built.source.path,
                             description=f"built: {built.tag}")
            else:
                await self._build_image(entry.get("name", tag), self.build_log.appendPlainText)
        except AgentDeskError as e:
            cancelled = str(e).endswith("was cancelled")
            entry["status"] = "cancelled" if cancelled else "failed"
            self.build_log.appendPlainText(e.user_message() if cancelled else f"failed: {e.user_message()}")
            self._image_changed(tag)
            return False
        finally:
            self._building = False
            self._show_running(False)
        entry["status"] = "built"
        self._image_changed(tag)
        return True


    def _own_entry(self) -> dict[str, Any] | None:
        entry = self.catalog.get(self.image.currentText())
        return entry if entry and entry.get("project") and entry.get("image") else None

    def _chosen_image(self) -> str:
        """The tag to store: the project's own image is its built (or, unbuilt, its would-be) tag."""
        own = self._own_entry()
        return own["image"] if own else (self.image.currentText().strip() or DEFAULT_IMAGE)

    def _project_image_setting(self) -> dict[str, Any]:
        """The file and digest the project's own image was built from (what the check compares with)."""
        own = self._own_entry()
        return {"project_image": {"source": own["source"], "digest": own["digest"]}} if own else {}


async def image_catalog() -> list[dict[str, Any]]:
    """The sandbox_images manifest with each image's build status (Docker is asked off the GUI thread;
    without Docker the catalog still lists what can be built)."""
    from ...runtime import list_images, load_catalog

    loop = asyncio.get_running_loop()
    try:
        statuses = await loop.run_in_executor(None, list_images)
        return [{"name": st.spec.name, "tag": st.spec.tag,
                 "description": st.spec.description or st.spec.label,
                 "status": "built" if st.present else "missing"} for st in statuses]
    except Exception as exc:  # no Docker: list the manifest, status unknown
        log.info("image status unavailable: %s", exc)
    try:
        specs = await loop.run_in_executor(None, load_catalog)
    except Exception as exc:
        log.warning("image catalog unavailable: %s", exc)
        return []
    return [{"name": sp.name, "tag": sp.tag, "description": sp.description or sp.label,
             "status": "unknown (Docker not available)"} for sp in specs.values()]


def project_image_entry(project: ProjectInfo) -> dict[str, Any] | None:
    """The picker's entry for the project's own image file (blocking: read and digested on a worker thread):
    built, changed since the build, not built, or unreadable (why)."""
    from ...runtime import find_project_image, project_image_digest, project_image_tag

    try:
        source = find_project_image(project.path)
        if source is None:
            return None
        digest = project_image_digest(project.path, source)
    except AgentDeskError as e:
        return {"name": "project", "project": True, "tag": PROJECT_IMAGE_PREFIX + "(unreadable)",
                "status": "unreadable", "description": e.user_message()}
    built = ProjectSettings.of(project.settings).project_image or {}
    status = "not built" if not built else "built" if built.get("digest") == digest else "changed"
    notes = f" ({len(source.notices)} setting(s) not applied: {'; '.join(source.notices)})" if source.notices else ""
    if source.build_args:  # shown before the build starts: what the project's file passes to it
        args = ", ".join(f"{k}={v}" for k, v in sorted(source.build_args.items()))
        notes += f". Build arguments from {source.name}, passed to the build: {args}"
    in_use = built and project.image.startswith(project_image_tag(project.id, project.name, "").rstrip(":"))
    return {"name": "project", "project": True, "tag": PROJECT_IMAGE_PREFIX + source.path, "status": status,
            "description": ("changed since the build: Build again" if status == "changed" else
                            "built only when you click Build") + notes,
            "image": project.image if in_use else project_image_tag(project.id, project.name, digest),
            "digest": built.get("digest", "") if in_use else digest, "source": source.path, "in_use": bool(in_use),
            "files": _files_line(project)}


def _files_line(project: ProjectInfo) -> str:
    """The project's image files, each with whether it is used and why (blocking: files)."""
    from ...runtime import project_image_files

    files = project_image_files(project.path)
    if len(files) < 2:
        return ""
    return "<small>Image files: " + "; ".join(
        f"<code>{html.escape(rel)}</code> — {'<b>' if why.startswith('used') else ''}{html.escape(why, quote=False)}"
        f"{'</b>' if why.startswith('used') else ''}" for rel, why in files) + "</small>"


async def build_project_image(project: ProjectInfo, on_progress: Callable[[str], None]) -> Any:
    """Build the project's own image on a worker thread (the person clicked Build), as one of the window's
    builds (the status bar shows it; Cancel stops it); its lines come to `on_progress` too."""
    from ... import runtime

    build = image_builds().start(
        f"project:{project.id}", f"Building the project's image for {project.name}",
        lambda say, cancel: runtime.build_project_image(project.path, project_id=project.id, name=project.name,
                                                        on_progress=say, cancel=cancel),
        lambda built: f"Built {built.tag}")
    return await _follow(build, on_progress)


async def build_image(name: str, on_progress: Callable[[str], None]) -> Any:
    """Build a catalog image on a worker thread, as one of the window's builds; its lines to `on_progress`."""
    from ... import runtime

    build = image_builds().start(
        f"image:{name}", f"Building {name}",
        lambda say, cancel: runtime.build_image(name, on_progress=say, cancel=cancel), lambda _r: f"Built {name}")
    return await _follow(build, on_progress)


async def _follow(build: RunningBuild, on_progress: Callable[[str], None]) -> Any:
    """The build's lines so far and as they come to `on_progress`, until it ends (a closed dialog stops
    following; the build goes on)."""
    for line in build.lines:
        on_progress(line)
    build.lineAdded.connect(on_progress)
    try:
        return await asyncio.shield(build.future)
    finally:
        with contextlib.suppress(RuntimeError, TypeError):
            build.lineAdded.disconnect(on_progress)
