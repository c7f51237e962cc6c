"""The desktop window: Qt models and views that follow core events through one EventBridge, and the
controller that turns what the person does into engine calls. Only what app.py composes is exported."""

from ._controller import AppController
from ._gc import MainThreadGarbageCollector
from ._instance import InstanceServer, send_to_running
from ._mainwindow import MainWindow
from ._report_pdf import write_pdf
from ._theme import apply_theme

__all__ = ["AppController", "InstanceServer", "MainThreadGarbageCollector", "MainWindow", "apply_theme",
           "send_to_running", "write_pdf"]
