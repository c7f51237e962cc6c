"""The image builds running in this window, wherever they were started (the status bar's Build, the project
dialog's): each with its lines, its elapsed time and a Cancel that stops it for real. The status bar shows
them while any runs, after their dialog was closed too, and opens their log again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from ..runtime import build_cancel

MAX_KEPT_LINES = 5000
Work = Callable[[Callable[[str], None], Any], Any]  # (progress, cancel) -> result; blocking, on a worker thread


def elapsed_text(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class RunningBuild(QObject):
    """One build: what it builds, its lines so far, when it started and how it ended."""

    lineAdded = Signal(str)
    finished = Signal(bool, str)  # ok, the sentence that says how it ended

    def __init__(self, key: str, title: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.key, self.title = key, title
        self.lines: list[str] = []
        self.started = time.monotonic()
        self.ended: float | None = None
        self.ok: bool | None = None
        self.message = ""
        self.cancel = build_cancel()
        self.future: asyncio.Future | None = None
        self.dialog: Any = None  # its log window, when one was opened
        self.done: Callable[[Any], str] = lambda _r: "Built"  # the sentence for what it built

    @property
    def running(self) -> bool:
        return self.ended is None

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def add_line(self, line: str) -> None:
        line = line.rstrip("\n")
        self.lines.append(line)
        del self.lines[:-MAX_KEPT_LINES]
        self.lineAdded.emit(line)

    def request_cancel(self) -> None:
        """Stop it: the engine's stream is hung up at once (the build's thread then says it was cancelled)."""
        if self.running and not self.cancel.cancelled:
            self.add_line("cancelling…")
            self.cancel.cancel()

    def finish(self, ok: bool, message: str) -> None:
        self.ended = time.monotonic()
        self.ok, self.message = ok, message
        self.finished.emit(ok, message)


class ImageBuilds(QObject):
    """Every build of this window: started here, one per thing built at a time."""

    changed = Signal()  # a build started or ended

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.builds: dict[str, RunningBuild] = {}

    def running(self) -> list[RunningBuild]:
        return [b for b in self.builds.values() if b.running]

    def cancel_all(self) -> None:
        """The window quits: every running build is stopped for real (its thread ends with the stream)."""
        for build in self.running():
            build.request_cancel()

    def find(self, key: str) -> RunningBuild | None:
        build = self.builds.get(key)
        return build if build is not None and build.running else None

    def start(self, key: str, title: str, work: Work, done: Callable[[Any], str] = lambda _r: "Built") -> RunningBuild:
        """Run `work` on a worker thread (its lines hop to the window); `done` says what was built. A build of
        `key` already running is returned as it is, never started twice."""
        running = self.find(key)
        if running is not None:
            return running
        build = self.builds[key] = RunningBuild(key, title, self)
        build.done = done
        loop = asyncio.get_running_loop()

        def progress(line: Any) -> None:  # on the build's thread
            loop.call_soon_threadsafe(build.add_line, str(line))

        build.future = loop.run_in_executor(None, lambda: work(progress, build.cancel))
        build.future.add_done_callback(lambda f: self._ended(build, f))
        self.changed.emit()
        return build

    def _ended(self, build: RunningBuild, future: asyncio.Future) -> None:
        exc = None if future.cancelled() else future.exception()
        if exc is None:
            build.finish(True, f"{build.done(future.result())} in {elapsed_text(build.elapsed())}")
        elif build.cancel.cancelled:
            build.finish(False, f"Cancelled after {elapsed_text(build.elapsed())}: nothing was tagged")
        else:
            said = exc.user_message() if hasattr(exc, "user_message") else f"{type(exc).__name__}: {exc}"
            build.finish(False, f"Failed after {elapsed_text(build.elapsed())}: {said}")
        self.changed.emit()


_BUILDS: ImageBuilds | None = None


def image_builds() -> ImageBuilds:
    """The window's builds (one per process: the status bar and every dialog see the same ones)."""
    global _BUILDS
    if _BUILDS is None:
        _BUILDS = ImageBuilds()
    return _BUILDS
