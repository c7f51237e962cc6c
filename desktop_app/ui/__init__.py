"""The desktop window: Qt models and widgets fed by core events through one EventBridge."""

from ._bridge import EventBridge
from ._controller import AppController
from ._conversation import ConversationView
from ._dialogs import ProjectSettingsDialog, SettingsDialog, would_allow
from ._history import HistoryModel, HistoryWindow
from ._inbox import ApprovalInbox, InboxDecision, InboxModel, PendingApproval
from ._mainwindow import MainWindow, PromptEdit
from ._projects import ProjectsModel, ProjectsSidebar
from ._timeline import TimelineDock, TimelineFilter, TimelineModel

__all__ = [
    "AppController",
    "ApprovalInbox",
    "ConversationView",
    "EventBridge",
    "HistoryModel",
    "HistoryWindow",
    "InboxDecision",
    "InboxModel",
    "MainWindow",
    "PendingApproval",
    "ProjectSettingsDialog",
    "ProjectsModel",
    "ProjectsSidebar",
    "PromptEdit",
    "SettingsDialog",
    "TimelineDock",
    "TimelineFilter",
    "TimelineModel",
    "would_allow",
]
