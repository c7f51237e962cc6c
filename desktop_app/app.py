"""The composition root of the desktop app: settings -> store -> bus -> window, on one qasync loop.

`agent-desk [FOLDER]` (no subcommand) calls `main()`: the window opens on FOLDER's project (made on first use),
or a window already running for this user takes the folder and this process exits. `--screenshot PATH` renders
the window offscreen and exits; `--sample-data` fills it with a demo project instead of the real store (both in
`ui/demo.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

_T0 = time.perf_counter()
log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent-desk", description="Agent Desk: the desktop window.")
    p.add_argument("folder", nargs="?", metavar="PATH",
                   help="open the window on this folder's project (made a project on first use)")
    p.add_argument("--db", help="audit database path or URL (default: the user data folder)")
    p.add_argument("-v", "--debug", action="store_true", help="log debug messages to stderr")
    p.add_argument("--sample-data", action="store_true", help="show a demo project (a temporary store)")
    p.add_argument("--screenshot", metavar="PATH", help="render the window offscreen to PATH and exit")
    p.add_argument("--view", choices=("main", "history", "inbox", "project-settings", "project-rules", "project-mcp",
                                      "rules-trust", "settings", "settings-mcp", "about", "approval-card",
                                      "project-tools", "settings-hooks", "plan", "subagent",
                                      "project-network", "prompt-images"),
                   default="main", help="what --screenshot captures")
    p.add_argument("--size", default="1440x880", help="window size for --screenshot (WxH)")
    p.add_argument("--theme", choices=("system", "light", "dark"), help="override the theme")
    p.add_argument("--exit-on-show", action="store_true",
                   help="print the start-up time when the window is first shown, then exit (benchmarks)")
    return p


def _no_display() -> bool:
    """On Linux, Qt aborts without a display; say so plainly instead."""
    return (
        sys.platform.startswith("linux")
        and not os.environ.get("QT_QPA_PLATFORM")
        and not os.environ.get("DISPLAY")
        and not os.environ.get("WAYLAND_DISPLAY")
    )


def main(argv: list[str] | None = None) -> int:
    from .logs import setup_logging

    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging(args.debug)
    if args.folder is not None:
        folder = Path(args.folder).expanduser()
        if not folder.is_dir():
            print(f"agent-desk: {args.folder} is not a folder.\n  hint: agent-desk PATH opens the window on a "
                  "project folder; the subcommands are listed by agent-desk --help", file=sys.stderr)
            return 2
        args.folder = str(folder.resolve())
    if _single_instance(args) and (handed := _hand_over(args)) is not None:
        return handed
    if args.screenshot or args.exit_on_show:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif _no_display():
        print(
            "agent-desk: there is no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset).\n"
            "  hint: start it from a desktop session or under Xvfb; `agent-desk --screenshot out.png` renders\n"
            "  the window offscreen, and `agent-desk run --project DIR PROMPT` is the same engine without one.",
            file=sys.stderr,
        )
        return 2
    elif _qt_cannot_start():
        return 2
    from PySide6.QtWidgets import QApplication

    _route_qt_messages()

    app = QApplication.instance() or QApplication(["agent-desk"])
    # The window's close ends `_run` (which then closes the controller, the sandboxes and the store, in
    # order): Qt must not stop the loop under it when the last window goes.
    app.setQuitOnLastWindowClosed(False)
    app.setApplicationName("Agent Desk")
    app.setOrganizationName("agent-desk")
    app.setDesktopFileName("agent-desk")
    icon = Path(__file__).resolve().parent / "ui" / "resources" / "agent-desk.svg"  # package data: wheel and bundle
    if icon.exists():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    from .ui import MainThreadGarbageCollector

    collector = MainThreadGarbageCollector(app)
    collector.start()
    loop = new_loop(app)
    try:
        return loop.run_until_complete(_run(app, args))
    finally:
        _finish_tasks(loop)
        loop.close()
        collector.stop()


def new_loop(app: Any) -> asyncio.AbstractEventLoop:
    """The window's event loop (qasync's, over `app`), set as the current one, with a default executor whose
    shutdown at quit waits for a stuck job at most QUIT_GRACE_S (runtime/_quit_executor.py)."""
    import qasync

    from .runtime import QuitBoundedExecutor

    loop = qasync.QEventLoop(app)
    loop.set_default_executor(QuitBoundedExecutor())
    asyncio.set_event_loop(loop)
    return loop


def _settle_gc(bus) -> None:
    """Start-up is done: freeze what it made, and collect the old generation between turns (issue 29)."""
    from .runtime import collect_between_turns, settle_after_startup

    settle_after_startup()
    bus.on("done", collect_between_turns)


def _qt_cannot_start() -> bool:
    """Before Qt aborts the process: on X11 (the xcb plugin), the system libraries it lacks are named with the
    command that installs them (the doctor's Qt check), and the start ends there."""
    from .doctor import qt_start_problem

    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform not in ("", "xcb") or (not platform and os.environ.get("WAYLAND_DISPLAY")):
        return False  # another plugin: a failure is said by the fatal message's handler (_route_qt_messages)
    problem = qt_start_problem()
    if problem is None:
        return False
    print(problem, file=sys.stderr)
    return True


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """What is still scheduled when the window has closed (a handler's task, a closing client) is
    cancelled and let to unwind, so nothing is destroyed pending (which prints to stderr)."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=5))


def _route_qt_messages() -> None:
    """Qt's own messages (the offscreen plugin's "does not support propagateSizeHints()", say) go to the
    log file, not to the terminal: a person sees the desk's warnings there, not Qt's."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("desktop_app.qt")
    levels = {QtMsgType.QtCriticalMsg: logging.ERROR, QtMsgType.QtFatalMsg: logging.CRITICAL}
    # Qt's warnings before a failure say why it failed ("could not connect to display"): the last few are
    # kept, and shown with the error that ends the start.
    recent: collections.deque[str] = collections.deque(maxlen=8)

    def handler(kind, _context, message: str) -> None:
        level = levels.get(kind, logging.INFO)
        if level < logging.ERROR:
            recent.append(message)
        else:
            while recent:
                qt_log.error("qt: %s", recent.popleft())
        qt_log.log(level, "qt: %s", message)
        if kind == QtMsgType.QtFatalMsg:  # Qt aborts next: say what is missing and how to install it
            from .doctor import qt_start_problem

            print(qt_start_problem() or "agent-desk: the window cannot start; `agent-desk doctor` says what is "
                  "missing and how to fix it.", file=sys.stderr, flush=True)

    qInstallMessageHandler(handler)


def _single_instance(args: argparse.Namespace) -> bool:
    """A real window takes part; a screenshot, a benchmark or the sample data stand alone."""
    return not (args.screenshot or args.exit_on_show or args.sample_data)


def _hand_over(args: argparse.Namespace) -> int | None:
    """A window already runs for this user and data folder: it takes the folder (or comes to the front), and
    this process ends with 0; None when there is none, or when it cannot be reached safely."""
    from .core import AgentDeskError

    try:
        from .ui import send_to_running

        answer = send_to_running({"open": args.folder} if args.folder else {"raise": "1"})
    except (AgentDeskError, OSError) as e:
        log.warning("no single-instance check: %s", e)
        return None
    if answer is None:
        return None
    if answer == "ok":
        print("agent-desk: the running window took it.", file=sys.stderr)
        return 0
    print(f"agent-desk: the running window refused it: {answer}", file=sys.stderr)
    return 2


async def _run(app, args: argparse.Namespace) -> int:
    from .ui import MainWindow, apply_theme

    window = MainWindow()
    if args.exit_on_show:
        shown = asyncio.get_running_loop().create_future()
        window.shown.connect(lambda: shown.done() or shown.set_result(time.perf_counter()))
        window.show()
        at = await shown
        print(f"shown {at - _T0:.3f}", flush=True)
        return 0

    asked = _on_terminate()  # from here on a signal quits in order, whenever it comes
    settings, settings_error = _load_settings()
    apply_theme(args.theme or settings.theme)
    hints = app.styleHints()
    if hasattr(hints, "colorSchemeChanged"):  # Qt 6.5+: follow the system when it switches
        hints.colorSchemeChanged.connect(lambda *_: apply_theme(args.theme or settings.theme))
    if not args.screenshot:
        window.show()  # shown before the store opens: start-up feels instant
    sample_dir = tempfile.TemporaryDirectory(prefix="agent-desk-sample-") if args.sample_data else nullcontext()
    with sample_dir as tmp:
        db = str(Path(tmp) / "sample.db") if tmp else args.db or _default_db()
        return await _run_window(app, window, settings, settings_error, db, args, asked)


async def _run_window(app, window, settings, settings_error: str | None, db: str, args: argparse.Namespace,
                      asked: asyncio.Future[None]) -> int:
    """Store, bus, sessions and controller around the window, until it closes (or is photographed)."""
    from .core import EventBus
    from .runtime import Desk
    from .ui import AppController

    if not args.sample_data:
        _say_if_new(db)
    store = await _open_store(db, signed=not args.sample_data)
    bus = await EventBus.open(store)
    key_source = await asyncio.get_running_loop().run_in_executor(None, _key_source, settings, bus)
    desk = Desk(settings=settings, store=store, bus=bus, api_key_source=key_source)
    controller = AppController(window, desk)
    controller.db_url = None if args.sample_data else db
    if settings_error:
        window.banner.set_item("settings", f"⚠ {settings_error}")
    closed = asyncio.get_running_loop().create_future()
    window.closed.connect(lambda: closed.done() or closed.set_result(None))

    def terminate(_: object = None) -> None:  # as "Quit anyway" does: nobody is there to answer a question
        controller.quit.quitting = True
        window.close()

    asked.add_done_callback(terminate)  # a signal that came while the store opened: at once
    server = _listen(controller) if _single_instance(args) and not asked.done() else None
    try:
        if args.sample_data:
            from .ui.demo import fill_sample

            await fill_sample(store, controller)
        elif not asked.done():  # asked to quit while the store opened: nothing more starts
            await controller.start(check_docker=not args.screenshot)
            if args.folder:
                await controller.open_folder(args.folder)
            _settle_gc(bus)
            if args.screenshot:  # show the real Docker state in the picture
                await controller.checks.check_docker()
        if args.screenshot:
            from .ui.demo import screenshot

            return await screenshot(window, controller, path=args.screenshot, view=args.view, size=args.size,
                                    sample=args.sample_data)
        if not closed.done():  # a signal during start-up closed it already: start-up ended, the desk closes
            window.quit_guard = controller.quit.guard  # Ctrl+Q or the title bar's close with work in flight asks
        await closed
        return 0
    finally:
        if server is not None:
            server.close()
        await controller.close()
        await desk.close()
        await store.close()


def _on_terminate() -> asyncio.Future[None]:
    """SIGTERM (a logout, `kill`) and SIGINT (Ctrl+C in the terminal): a future set when one comes, from the
    moment the loop runs (start-up included), so the desk quits in order and silently, never by a traceback."""
    import signal

    loop = asyncio.get_running_loop()
    asked: asyncio.Future[None] = loop.create_future()

    def ask() -> None:
        if not asked.done():
            asked.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, ask)
        except (NotImplementedError, RuntimeError, ValueError):  # not on this platform or loop
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(ask))
    return asked


def _listen(controller):
    """Take folders from later `agent-desk PATH` processes of this user."""
    from .core import AgentDeskError
    from .ui import InstanceServer

    try:
        server = InstanceServer(controller.handle_instance_message, parent=controller)
    except (AgentDeskError, OSError) as e:
        log.warning("no single-instance server: %s", e)
        return None
    return server if server.listen() else None


def _load_settings():
    from .config import Settings
    from .core import AgentDeskError

    try:
        return Settings.load(), None
    except AgentDeskError as exc:
        return Settings(), exc.user_message()


def _say_if_new(db: str) -> None:
    """The window creates its database on first use, and says so (a mistyped --db shows here)."""
    from .config import sqlite_file

    path = sqlite_file(db)
    if path is not None and not path.exists():
        print(f"agent-desk: creating the audit database {path}", file=sys.stderr)


def _default_db() -> str:
    from .config import default_db_url

    return default_db_url()


def _key_source(settings, bus=None) -> str | None:
    from .config import resolve_api_key
    from .logs import remember_secret

    key = resolve_api_key(settings)
    if key is not None:
        remember_secret(key.value)
        if bus is not None:  # a prompt is stored before any runtime (whose redactor knows the key) is built
            bus.redactor = bus.redactor.with_literals([key.value])
    return key.source if key else None


async def _open_store(db: str, *, signed: bool = True):
    # the store's modules (SQLAlchemy, Alembic) are imported on a worker thread, off the GUI thread;
    # the signing key is read there too (the keyring may block). The sample data's throwaway database is unsigned.
    from .runtime import head_signer

    loop = asyncio.get_running_loop()
    mod = await loop.run_in_executor(None, __import__, "desktop_app.store", None, None, ["SqlStore"])
    signer = await loop.run_in_executor(None, head_signer) if signed else None
    return await mod.SqlStore.open(db, signer=signer)


if __name__ == "__main__":
    raise SystemExit(main())
