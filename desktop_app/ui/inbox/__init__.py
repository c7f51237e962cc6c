"""The approval inbox: pending calls of every session, as a list model with painted cards, and the dock
that answers them with core's Allow | Deny."""

from ._delegate import InboxCardDelegate
from ._dock import KEY_ALLOW, KEY_ALWAYS, KEY_DENY, KEY_EDIT, KEY_SESSION, ApprovalInbox
from ._items import PendingApproval
from ._model import InboxModel
from ._questions import QuestionsPanel

__all__ = [
    "KEY_ALLOW",
    "KEY_ALWAYS",
    "KEY_DENY",
    "KEY_EDIT",
    "KEY_SESSION",
    "ApprovalInbox",
    "InboxCardDelegate",
    "InboxModel",
    "PendingApproval",
    "QuestionsPanel",
]
