"""The project settings' Network tab: the sandbox's network mode (off, allowlist through the desk's proxy, or
on), the presets, and the person's own list of domain patterns with add and remove (a malformed pattern is
refused with the reason, which names the setting). The repository's proposed list (.agent-desk/network.toml)
is shown with its consent: it is approved from the banner, never here."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...core import (
    ALLOWLIST_SETTING,
    NETWORK_PRESETS,
    AgentDeskError,
    ConsentStatus,
    NetworkAllowlist,
    ProjectSettings,
)

PRESET_NAMES = {"python": "Python (PyPI)", "node": "Node (npm, yarn)", "debian": "Debian (apt)",
                "github": "GitHub"}
MODES = ((False, "Off: no network at all"),
         ("allowlist", "Allowlist: only what is listed, through the desk's proxy (anything else asks)"),
         (True, "On: the full network (UNSAFE: the widest door out)"))


class NetworkSection(QWidget):
    """The mode, the presets and the list; `values()` is what the project settings store."""

    def __init__(self, settings: Mapping[str, Any], *, repository: Any = None) -> None:
        super().__init__()
        known = ProjectSettings.of(settings)
        self._had_list = ALLOWLIST_SETTING in settings
        self.mode = QComboBox()
        for value, label in MODES:
            self.mode.addItem(label, value)
        self.mode.setCurrentIndex(max(0, self.mode.findData(known.network)))
        self.presets: dict[str, QCheckBox] = {}
        written = [str(e).strip() for e in known.network_allow or []]
        for name, label in PRESET_NAMES.items():
            box = QCheckBox(label)
            box.setToolTip(", ".join(NETWORK_PRESETS.get(name, ())))  # the desk's own list for it
            box.setChecked(f"@{name}" in {w.lower() for w in written})
            self.presets[name] = box
        self.list = QListWidget()
        self.list.addItems([w for w in written if w.lower().removeprefix("@") not in PRESET_NAMES or
                            not w.startswith("@")])  # an unknown preset stays shown (and refused at Save)
        self.pattern = QLineEdit()
        self.pattern.setPlaceholderText("pypi.org, *.example.org:443, 10.0.0.5")
        self.pattern.returnPressed.connect(self.add_pattern)
        self.add_btn = QPushButton("Add")
        self.add_btn.clicked.connect(self.add_pattern)
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.clicked.connect(self.remove_selected)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d9363e")
        self.repository = QLabel(_repository_text(repository))
        self.repository.setWordWrap(True)
        self.repository.setTextFormat(Qt.TextFormat.RichText)
        self.repository.setVisible(repository is not None)
        self._lay_out()
        self.mode.currentIndexChanged.connect(self._mode_changed)
        self._mode_changed()

    def _lay_out(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Network from the sandbox"))  # the mode first: the rest applies to the allowlist
        lay.addWidget(self.mode)
        self.allow_box = QWidget()
        inner = QVBoxLayout(self.allow_box)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(QLabel("Presets: what each ecosystem's package tools fetch from"))
        row = QHBoxLayout()
        for box in self.presets.values():
            row.addWidget(box)
        row.addStretch(1)
        inner.addLayout(row)
        about = QLabel("Your list (<code>network_allow</code>): a domain, <code>*.domain</code> for its "
                       "subdomains, an address or network; ports after <code>:</code> (80 and 443 when none)")
        about.setWordWrap(True)
        inner.addWidget(about)
        inner.addWidget(self.list, 1)
        add = QHBoxLayout()
        add.addWidget(self.pattern, 1)
        add.addWidget(self.add_btn)
        add.addWidget(self.remove_btn)
        inner.addLayout(add)
        inner.addWidget(self.error)
        inner.addWidget(self.repository)
        lay.addWidget(self.allow_box, 1)
        self.note = QLabel()
        self.note.setWordWrap(True)
        lay.addWidget(self.note)

    def _mode_changed(self, *_: Any) -> None:
        mode = self.mode.currentData()
        self.allow_box.setEnabled(mode == "allowlist")
        self.note.setText({
            False: "The sandbox has no network: no route, no DNS, not even this machine's services.",
            True: "<span style='color:#d9363e'>The sandbox reaches the whole network: anything it reads can "
                  "leave.</span>",
        }.get(mode, "Every connection is recorded in the audit, under the call that made it. A domain not "
                    "listed asks (ask mode) or is refused (strict, read-only, plan, auto)."))

    def add_pattern(self) -> bool:
        """Add the typed pattern; a malformed one is refused with the reason (naming the setting)."""
        text = self.pattern.text().strip()
        if not text:
            return False
        try:
            NetworkAllowlist.parse([text])
        except AgentDeskError as exc:
            self.error.setText(exc.user_message())
            return False
        self.error.clear()
        if text.startswith("@"):
            box = self.presets.get(text[1:].lower())
            if box is not None:
                box.setChecked(True)
        elif text.lower() not in {self.list.item(i).text().lower() for i in range(self.list.count())}:
            self.list.addItem(text)
        self.pattern.clear()
        return True

    def remove_selected(self) -> None:
        for item in self.list.selectedItems():
            self.list.takeItem(self.list.row(item))

    def patterns(self) -> list[str]:
        return [f"@{name}" for name, box in self.presets.items() if box.isChecked()] + \
            [self.list.item(i).text() for i in range(self.list.count())]

    def values(self) -> dict[str, Any]:
        """The mode, and the list when it has entries or was stored (an untouched project keeps equal settings:
        its runtime and container stay)."""
        patterns = self.patterns()
        return {"network": self.mode.currentData(),
                **({ALLOWLIST_SETTING: patterns} if patterns or self._had_list else {})}

    def problem(self) -> str | None:
        """A pattern typed but not added, said before saving (it would be lost otherwise)."""
        if self.pattern.text().strip():
            return f"Network: the pattern {self.pattern.text().strip()!r} is not added yet (Add, or clear it)."
        try:  # a list stored before (or written by hand) with a malformed entry: said, not saved
            NetworkAllowlist.parse(self.patterns())
        except AgentDeskError as exc:
            return f"Network: {exc.user_message()}"
        return None


def _repository_text(consent: Any) -> str:
    if consent is None:
        return ""
    listed = ", ".join(f"<code>{html.escape(line)}</code>" for line in (consent.current or "").splitlines()
                       if line and not line.startswith("#"))
    if consent.status is ConsentStatus.APPROVED:
        state = "<span style='color:#2f9e44'>approved by you</span>: these are reachable too"
    elif listed:
        state = ("<span style='color:#d4890b'>waiting for your approval</span> (the banner's Review…, or "
                 "<code>agent-desk consent approve --kind network-list</code>): until then only your list applies")
    else:
        state = f"<span style='color:#d9363e'>{html.escape((consent.current or '').lstrip('# ').strip())}</span>"
    return (f"<small>The repository's <code>.agent-desk/network.toml</code> proposes {listed or 'nothing usable'}: "
            f"{state}.</small>")
