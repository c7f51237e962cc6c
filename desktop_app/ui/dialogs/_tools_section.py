"""The project settings' "Tools & hooks" tab: the tool profile, a switch per tool, how long an approval waits,
and the project's hooks file with its grant (the file is the agent-writable workspace's: it runs only as granted)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ...core import (
    HOOKS_FILE,
    TOOL_PROFILES,
    AgentDeskError,
    ConsentKind,
    ConsentStatus,
    ProjectSettings,
    Tool,
    user_hooks_from_toml,
)
from ...runtime import Consent

PROFILE_KEY, DISABLED_KEY, EXPIRY_KEY = "tool_profile", "disabled_tools", "approval_expiry_s"  # as declared
_DEFAULT_PROFILE = ProjectSettings.model_fields["tool_profile"].default
INHERIT = -1  # the expiry box's "use the default from Settings"
MAX_EXPIRY_S = 7 * 24 * 3600


def expiry_text(seconds: float | None) -> str:
    """How an expiry reads: "approvals wait until answered", or "5 min 0 s"."""
    if not seconds:
        return "approvals wait until answered"
    m, s = divmod(int(seconds), 60)
    return f"denied after {m} min {s} s" if m else f"denied after {s} s"


def builtin_tool_list() -> list[Tool]:
    try:
        from ...runtime import builtin_tools

        return list(builtin_tools())
    except Exception:  # the dialog still opens; the switches list is empty
        return []


class ToolsHooksSection(QWidget):
    """Profile, switches, expiry and the hooks grant; `values()` is what goes into the project's settings."""

    def __init__(self, st: dict[str, Any], project_dir: str, *, default_expiry: float | None = None,
                 hooks: Consent | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._st = st
        self._project_dir = project_dir
        self._hooks = hooks  # the hooks file and its scripts against the grant, as read on opening
        self._approved = hooks.approved_digest if hooks is not None else None
        self._hooks_text: str | None = None
        lay = QVBoxLayout(self)
        lay.addWidget(self._tools_box(st), 3)
        lay.addWidget(self._expiry_box(st, default_expiry))
        lay.addWidget(self._hooks_box(), 2)

    def _tools_box(self, st: dict[str, Any]) -> QGroupBox:
        box = QGroupBox("Tools offered to the model")
        form = QFormLayout(box)
        self.profile = QComboBox()
        self.profile.addItems(list(TOOL_PROFILES))
        self.profile.setCurrentText(str(ProjectSettings.of(st).tool_profile or _DEFAULT_PROFILE))
        form.addRow("Tool profile", self.profile)
        self.tool_list = QListWidget()
        # in columns: every switch in view at once, without a scroll
        self.tool_list.setFlow(QListView.Flow.LeftToRight)
        self.tool_list.setWrapping(True)
        self.tool_list.setResizeMode(QListView.ResizeMode.Adjust)
        self.tool_list.setGridSize(QSize(220, 22))
        off = set(ProjectSettings.of(st).disabled_tools or [])
        for t in builtin_tool_list():
            meta = " · ".join(x for x in (f"v{t.version}" if t.version else "", ", ".join(t.tags),
                                          "read-only" if t.read_only else "") if x)
            item = QListWidgetItem(t.name + (f"  ({meta})" if meta else ""))
            item.setData(Qt.ItemDataRole.UserRole, t.name)
            item.setToolTip(t.description.split("\n")[0])
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked if t.name in off else Qt.CheckState.Checked)
            self.tool_list.addItem(item)
        self._unknown_off = sorted(off - {t.name for t in builtin_tool_list()})  # an MCP tool switched off: kept
        self.profile.currentTextChanged.connect(self._profile_changed)
        self._profile_changed(self.profile.currentText())
        form.addRow("Switches", self.tool_list)
        note = QLabel("A tool switched off, outside the profile, or denied by a rule without a pattern "
                      "(deny = [\"bash_run\"]) is not offered, and a call of it is denied.")
        note.setWordWrap(True)
        form.addRow("", note)
        return box

    def _profile_changed(self, profile: str) -> None:
        """Tools outside the profile are greyed: their switch matters only under another profile."""
        from ...core import ToolRegistry

        inside = {t.name for t in ToolRegistry(builtin_tool_list()).for_profile(profile)}
        for i in range(self.tool_list.count()):
            item = self.tool_list.item(i)
            name = item.data(Qt.ItemDataRole.UserRole)
            flags = item.flags()
            enabled = flags | Qt.ItemFlag.ItemIsEnabled
            item.setFlags(enabled if name in inside else flags & ~Qt.ItemFlag.ItemIsEnabled)

    def _expiry_box(self, st: dict[str, Any], default: float | None) -> QGroupBox:
        box = QGroupBox("Approvals")
        form = QFormLayout(box)
        self.expiry = QSpinBox()
        self.expiry.setRange(INHERIT, MAX_EXPIRY_S)
        self.expiry.setSuffix(" s")
        self.expiry.setSpecialValueText(f"the default from Settings ({expiry_text(default)})")
        value = ProjectSettings.of(st).approval_expiry_s
        self.expiry.setValue(INHERIT if value is None else int(value))
        self.expiry.setToolTip("0: an approval waits until someone answers it")
        form.addRow("Expire after", self.expiry)
        return box

    def _hooks_box(self) -> QGroupBox:
        box = QGroupBox(f"The project's hooks ({HOOKS_FILE})")
        lay = QVBoxLayout(box)
        self.hooks_state = QLabel()
        self.hooks_state.setWordWrap(True)
        self.hooks_view = QPlainTextEdit()
        self.hooks_view.setReadOnly(True)
        self.hooks_view.setMinimumHeight(60)
        self.hooks_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.hooks_grant = QCheckBox("Run these hooks in the sandbox (grants exactly this text)")
        lay.addWidget(self.hooks_state)
        lay.addWidget(self.hooks_view, 1)
        lay.addWidget(self.hooks_grant)
        self.load_hooks()
        return box

    def load_hooks(self) -> None:
        """Show the hooks file as read with its scripts (no link followed), and whether the grant matches."""
        hooks = self._hooks
        granted = self._approved
        if hooks is None or hooks.current is None:
            self._hooks_text = None
            self.hooks_view.setPlainText("")
            self.hooks_grant.setEnabled(False)
            self.hooks_grant.setChecked(False)
            if not self.hooks_state.text():
                self.hooks_state.setText("No hooks file in this project. Your own hooks are in Settings.")
            return
        self._hooks_text, self._digest = hooks.current, hooks.digest
        self.hooks_view.setPlainText(hooks.current + (hooks.detail or ""))
        self.hooks_grant.setEnabled(True)
        self.hooks_grant.setChecked(granted == self._digest)
        self.hooks_state.setText(
            "Granted: these hooks run before and after matching tools." if granted == self._digest else
            "<span style='color:#d4890b'>⚠ " + ("Changed since you granted it" if granted else "Never granted")
            + ": these hooks do not run until you grant them. The agent may have written this file.</span>")

    def problem(self) -> str | None:
        """Why the section cannot be saved: a hooks file granted that cannot be read as hooks."""
        if self._hooks_text is None or not self.hooks_grant.isChecked():
            return None
        try:
            user_hooks_from_toml(self._hooks_text)
        except AgentDeskError as e:
            return f"Hooks: {e.user_message()}"
        return None

    def values(self) -> dict[str, Any]:
        off = [self.tool_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.tool_list.count())
               if self.tool_list.item(i).checkState() != Qt.CheckState.Checked]
        profile, disabled = self.profile.currentText(), sorted(off + self._unknown_off)
        # a default left as it was adds no key: an untouched project stays equal (and keeps its runtime)
        out: dict[str, Any] = {
            PROFILE_KEY: profile if profile != _DEFAULT_PROFILE or PROFILE_KEY in self._st else None,
            DISABLED_KEY: disabled if disabled or DISABLED_KEY in self._st else None,
            EXPIRY_KEY: None if self.expiry.value() == INHERIT else self.expiry.value()}
        return out

    def decisions(self) -> list[tuple[Consent, bool]]:
        """The hooks grant given (revoke False) or taken back (True) in this dialog, bound to the text shown:
        applied on Save (a file changed since is refused then, and said so)."""
        granted = self._hooks_text is not None and self._approved == self._digest
        want = self._hooks_text is not None and self.hooks_grant.isChecked()
        if want == granted:
            return []
        if want and self._hooks is not None:
            return [(self._hooks, False)]  # exactly what was read and shown, scripts included
        consent = Consent(ConsentKind.HOOKS, self._project_dir, "", ConsentStatus.of(None, self._approved), None,
                          None, self._approved)
        return [(consent, True)]


def merged_settings(settings: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    """The project's settings with the section's values; a None value removes its key (inherit, no grant)."""
    out = {**settings, **section}
    return {k: v for k, v in out.items() if not (k in section and v is None)}
