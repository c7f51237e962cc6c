"""The settings dialog's Plugins tab: each installed plugin (`agent_desk.tools` entry point) with its tools,
package and version, a switch to turn it off, and why a refused one is not loaded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtWidgets import QCheckBox, QLabel, QVBoxLayout, QWidget


class PluginsTab(QWidget):
    def __init__(self, found: Iterable[Any], disabled: Iterable[str], parent=None) -> None:
        super().__init__(parent)
        self._disabled = list(disabled)
        self.boxes: dict[str, QCheckBox] = {}
        lay = QVBoxLayout(self)
        intro = QLabel("Installed Python packages can add tools (entry point group agent_desk.tools). A plugin's "
                       "tool is judged, approved and recorded like a built-in, in group:plugin, and never runs "
                       "unasked as read-only. Plugins run in the desk's own process: install only those you "
                       "trust. A change applies to sessions opened after Save.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        found = list(found)
        if not found:
            lay.addWidget(QLabel("No plugin is installed."))
        for p in found:
            tools = ", ".join(p.tools) or p.entry
            box = QCheckBox(f"{tools} — {p.package} {p.version}")
            box.setChecked(p.enabled and not p.problem)
            box.setEnabled(not p.problem)
            box.setToolTip(f"entry point {p.entry!r}")
            self.boxes[p.entry] = box
            lay.addWidget(box)
            if p.problem:
                why = QLabel(f"Not loaded: {p.problem}")
                why.setWordWrap(True)
                why.setStyleSheet("color: #b3261e")
                lay.addWidget(why)
        lay.addStretch(1)

    def disabled(self) -> list[str]:
        """plugins_disabled as it will be saved: what was off and is not shown here, and every box unticked."""
        shown = set(self.boxes)
        kept = [d for d in self._disabled if d not in shown]
        return kept + [entry for entry, box in self.boxes.items() if box.isEnabled() and not box.isChecked()]
