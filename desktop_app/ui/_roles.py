"""The Qt item data roles of every model in the window, in one enum so no two mean the same number."""

from __future__ import annotations

from enum import IntEnum

from PySide6.QtCore import Qt

_USER = int(Qt.ItemDataRole.UserRole)


class Role(IntEnum):
    CALL_ID = _USER + 1  # the tool call's id (timeline, inbox, history)
    STATE = _USER + 2  # the ToolCallState value (timeline)
    TOOL = _USER + 3  # the tool's name (timeline)
    ITEM = _USER + 4  # the row's object: a PendingApproval (inbox)
    KIND = _USER + 5  # "project" | "session" (projects tree)
    ID = _USER + 6  # the project's or session's id (projects tree)
    SUBTITLE = _USER + 7  # the muted second line (projects tree)
    OBJECT = _USER + 8  # the ProjectInfo or SessionInfo (projects tree)
    AGENT_STATE = _USER + 9  # the session's agent state and what a pause waits for: (state, reason) (projects tree)
