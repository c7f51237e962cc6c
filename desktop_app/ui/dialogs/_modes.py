"""The permission-mode picker that the settings and project dialogs share, built from PermissionMode."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from ...core import PermissionMode

MODE_HELP: dict[PermissionMode, str] = {
    PermissionMode.ASK: "ask before anything that writes or runs",
    PermissionMode.ACCEPT_EDITS: "file edits inside the workspace run; commands ask",
    PermissionMode.READ_ONLY: "only reading tools; the rest is denied",
    PermissionMode.AUTO: "everything runs unless a rule asks or denies",
    PermissionMode.STRICT: "only what a rule allows; nothing asks",
}


def mode_combo(current: str) -> QComboBox:
    """A combo of every PermissionMode with its one-line meaning; its data is the mode's value."""
    box = QComboBox()
    for m in PermissionMode:
        box.addItem(f"{m.value} — {MODE_HELP.get(m, '')}", m.value)
    box.setCurrentIndex(max(0, box.findData(current)))
    return box
