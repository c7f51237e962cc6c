"""The permission-mode picker that the settings and project dialogs share, built from PermissionMode."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from ...core import PermissionMode

# One true sentence each (core/policy/_policy.py `_by_mode` and `_judge_command`); in every mode a rule that
# denies or asks is followed first, and the control folders are never changed.
MODE_HELP: dict[PermissionMode, str] = {
    PermissionMode.ASK: "reading tools run; every command and every change asks first",
    PermissionMode.ACCEPT_EDITS: "reading tools and file edits inside the workspace run; commands and the rest ask",
    PermissionMode.READ_ONLY: "only reading tools (and what a rule allows) run; the rest is denied",
    PermissionMode.AUTO: "runs everything except what a rule asks or denies and high-risk or unreadable calls, "
                         "which ask",
    PermissionMode.STRICT: "only what a rule allows runs; the rest is denied and nothing asks",
    PermissionMode.PLAN: "the agent reads and plans; nothing that changes a file runs until you approve its plan",
}


def mode_combo(current: str) -> QComboBox:
    """A combo of every PermissionMode with its one-line meaning; its data is the mode's value."""
    box = QComboBox()
    for m in PermissionMode:
        box.addItem(f"{m.value} — {MODE_HELP.get(m, '')}", m.value)
    box.setCurrentIndex(max(0, box.findData(current)))
    return box
