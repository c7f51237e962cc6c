"""The host's changes to a project folder that no tool made, watched, debounced and reported."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any

# the project folder's changes that no tool made -------------------------------------------------------
DEBOUNCE_S = 0.25  # an editor's save is several events: they go out as one file_changed
TOOL_QUIET_S = 0.5  # changes this soon after a tool wrote are the tool's (and the sync's) own
_IGNORED_DIRS = (".agent-desk", ".git")
_KINDS = {"created": "created", "modified": "modified", "deleted": "deleted", "moved": "moved",
          "closed": "modified"}


class WorkspaceWatcher:
    """A watchdog observer on a project folder: file events (control folders left out) gathered on the
    event loop, debounced, and reported as (paths, kinds) unless a tool call was writing then."""

    def __init__(self, root: str | os.PathLike[str], report: Callable[[list[str], list[str]], None], *,
                 tools_writing: Callable[[], bool] = lambda: False, debounce_s: float = DEBOUNCE_S) -> None:
        self.root = os.path.realpath(root)
        self.report = report
        self.tools_writing = tools_writing
        self.debounce_s = debounce_s
        self._loop = asyncio.get_running_loop()
        self._pending: dict[str, str] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._observer: Any = None

    def start(self) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:  # on the observer's thread
                watcher._seen(event)

        self._observer = Observer()
        self._observer.daemon = True
        self._observer.schedule(Handler(), self.root, recursive=True)
        self._observer.start()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join, 5)

    def relative(self, path: str | bytes) -> str | None:
        """The workspace-relative path, or None for the root, a control folder or a path outside."""
        text = os.fsdecode(path)
        rel = os.path.relpath(text, self.root)
        if rel == "." or rel.startswith(".."):
            return None
        first = rel.split(os.sep, 1)[0]
        return None if first in _IGNORED_DIRS else rel.replace(os.sep, "/")

    def _seen(self, event: Any) -> None:
        kind = _KINDS.get(event.event_type)
        if kind is None or (event.is_directory and kind == "modified"):
            return
        found = [(event.src_path, "deleted" if kind == "moved" else kind)]
        if kind == "moved":
            found.append((event.dest_path, "created"))
        for path, what in found:
            rel = self.relative(path)
            if rel is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed under us: nobody listens
                    self._loop.call_soon_threadsafe(self._add, rel, what)

    def _add(self, rel: str, kind: str) -> None:
        if self.tools_writing():
            return
        self._pending[rel] = kind if rel not in self._pending or kind != "modified" else self._pending[rel]
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(self.debounce_s, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, {}
        if pending and not self.tools_writing():
            paths = sorted(pending)
            self.report(paths, [pending[p] for p in paths])
