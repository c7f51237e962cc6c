"""Settings and project settings dialogs. Both open with open() and hand back a future; slow work
(keyring, image builds) runs off the GUI thread."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ..core import (
    AgentDeskError,
    ConfigError,
    PermissionMode,
    PermissionPolicy,
    ProjectInfo,
    RuleSet,
    ToolFacts,
    project_rules_path,
)

MODES = [m.value for m in PermissionMode]
MODE_HELP = {
    "ask": "ask before anything that writes or runs",
    "accept-edits": "file edits inside the workspace run; commands ask",
    "read-only": "only reading tools; the rest is denied",
    "auto": "everything runs unless a rule asks or denies",
    "strict": "only what a rule allows; nothing asks",
}


class FutureDialog(QDialog):
    """open() the dialog and await `ask()`: the value on accept, None on cancel. Never exec()."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._future: asyncio.Future | None = None
        self.finished.connect(self._finished)

    def ask(self) -> asyncio.Future:
        self._future = asyncio.get_event_loop().create_future()
        self.open()
        return self._future

    def value(self) -> Any:
        return True

    def _finished(self, code: int) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(self.value() if code == QDialog.DialogCode.Accepted else None)


def _mode_combo(current: str) -> QComboBox:
    box = QComboBox()
    for m in MODES:
        box.addItem(f"{m} — {MODE_HELP.get(m, '')}", m)
    box.setCurrentIndex(max(0, MODES.index(current) if current in MODES else 0))
    return box


@dataclasses.dataclass(slots=True)
class SettingsResult:
    model: str
    base_url: str | None
    permission_mode: str
    theme: str
    api_key: str | None  # None: unchanged
    clear_key: bool = False


class SettingsDialog(FutureDialog):
    """The API key (keyring, or an explicit warned fallback), endpoint, model, default mode, theme."""

    def __init__(self, settings: Any, *, key_source: str | None, keyring_ok: bool, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings — Agent Desk")
        self.setMinimumWidth(640)
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("sk-ant-…  (leave empty to keep the current key)")
        where = {"keyring": "stored in the system keyring", "settings": "stored in the settings file",
                 "env": "read from ANTHROPIC_API_KEY"}.get(key_source or "", "not set")
        self.key_state = QLabel(f"Current key: {where}")
        self.clear_key = QCheckBox("Forget the stored key")
        self.keyring_warning = QLabel(
            "⚠ No keyring backend is available: the key will be written to "
            f"{getattr(settings, 'path', '') or 'the settings file'} (readable only by you).\n"
            "Install and unlock a keyring (gnome-keyring, KWallet) to keep it out of files.")
        self.keyring_warning.setWordWrap(True)
        self.keyring_warning.setStyleSheet("color: #d4890b")
        self.keyring_warning.setVisible(not keyring_ok)
        self.base_url = QLineEdit(settings.base_url or "")
        self.base_url.setPlaceholderText("https://api.anthropic.com (default)")
        self.model = QLineEdit(settings.model)
        self.mode = _mode_combo(settings.permission_mode)
        self.theme = QComboBox()
        for t in ("system", "light", "dark"):
            self.theme.addItem({"system": "Follow the system"}.get(t, t.capitalize()), t)
        self.theme.setCurrentIndex(max(0, self.theme.findData(getattr(settings, "theme", "system"))))

        form = QFormLayout()
        form.addRow("API key", self.key)
        form.addRow("", self.key_state)
        form.addRow("", self.clear_key)
        form.addRow("", self.keyring_warning)
        form.addRow("Base URL", self.base_url)
        form.addRow("Model", self.model)
        form.addRow("Default mode", self.mode)
        form.addRow("Theme", self.theme)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(bb)

    def value(self) -> SettingsResult:
        return SettingsResult(
            model=self.model.text().strip() or "claude-sonnet-4-6",
            base_url=self.base_url.text().strip() or None,
            permission_mode=self.mode.currentData(),
            theme=self.theme.currentData(),
            api_key=self.key.text().strip() or None,
            clear_key=self.clear_key.isChecked(),
        )


def tool_facts() -> dict[str, ToolFacts]:
    try:
        from ..tools import builtin_tools

        return {t.name: ToolFacts(t.name, t.group, t.read_only) for t in builtin_tools()}
    except Exception:  # the tester still works with custom names
        return {}


def would_allow(rules_text: str, mode: str, tool: str, input_json: str) -> str:
    """'Would this call be allowed?': the decision, its reason and what decided it, as one line of HTML."""
    try:
        rules = RuleSet.from_text(rules_text)
        data = json.loads(input_json or "{}")
        if not isinstance(data, dict):
            raise ConfigError("the input must be a JSON object")
    except json.JSONDecodeError as e:
        return f"<span style='color:#d9363e'>input is not JSON: {e}</span>"
    except AgentDeskError as e:
        return f"<span style='color:#d9363e'>{e.user_message()}</span>"
    facts = tool_facts().get(tool) or ToolFacts(tool)
    policy = PermissionPolicy(mode=mode, rules=rules)
    d = policy.resolve_ask(policy.evaluate(facts, data))
    colour = {"allow": "#2f9e44", "ask": "#d4890b", "deny": "#d9363e"}[d.action.value]
    p = d.provenance
    return (f"<b style='color:{colour}'>{d.action.value.upper()}</b> — {d.reason}"
            f"<br><small>decided by {p.kind}: <code>{p.detail}</code> · risk {d.risk}</small>")


class ProjectSettingsDialog(FutureDialog):
    """Folder, sandbox image (catalog with build status and Build, or any local tag), network, limits,
    workspace mode, permission mode, and a rules editor with a tester."""

    def __init__(
        self,
        project: ProjectInfo | None,
        *,
        catalog: list[dict[str, Any]] | None = None,
        build_image: Callable[[str, Callable[[str], None]], Awaitable[Any]] | None = None,
        default_mode: str = "ask",
        default_image: str = "agent-desk/minimal:latest",
        parent=None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("New project" if project is None else f"Project settings — {project.name}")
        self.resize(720, 600)
        self.project = project
        self._build_image = build_image
        st = dict(project.settings) if project else {}

        self.folder = QLineEdit(project.path if project else "")
        self.folder.setPlaceholderText("/path/to/your/project")
        browse = QPushButton("Browse…")
        self._tasks: set[asyncio.Task] = set()
        browse.clicked.connect(lambda: self._spawn(self._browse()))
        self.name = QLineEdit(project.name if project else "")
        self.name.setPlaceholderText("defaults to the folder's name")
        self.image = QComboBox()
        self.image.setEditable(True)
        self.image.setToolTip("Pick an image from the catalog, or type any local image tag")
        self.catalog: dict[str, dict[str, Any]] = {}
        for entry in catalog or []:
            self.add_catalog_entry(entry)
        self.image.setCurrentText(project.image if project else default_image)
        self.image_status = QLabel()
        self.build_btn = QPushButton("Build")
        self.build_btn.clicked.connect(lambda: self._spawn(self.build_selected()))
        self.build_progress = QProgressBar()
        self.build_progress.setRange(0, 0)
        self.build_progress.hide()
        self.build_log = QLabel()
        self.build_log.setWordWrap(True)
        self.image.currentTextChanged.connect(self._image_changed)

        self.network = QCheckBox("Allow network access from the sandbox")
        self.network.setChecked(bool(st.get("network", False)))
        self.memory = QLineEdit(str(st.get("memory", "2g")))
        self.cpus = QDoubleSpinBox()
        self.cpus.setRange(0.1, 64)
        self.cpus.setSingleStep(0.5)
        self.cpus.setValue(float(st.get("cpus", 2.0)))
        self.local = QCheckBox("Run tools on this machine, without a container (local sandbox: UNSAFE)")
        self.local.setToolTip("For development without Docker: commands run on your machine as you.")
        self.local.setChecked(st.get("sandbox") == "local")
        self.local.setStyleSheet("QCheckBox:checked { color: #d9363e; }")
        self.workspace_ro = QCheckBox("Mount the workspace read-only")
        self.workspace_ro.setChecked(bool(st.get("workspace_ro", False)))
        self.mode = _mode_combo(project.permission_mode if project else default_mode)

        self.rules = QPlainTextEdit()
        self.rules.setPlaceholderText('[permissions]\nallow = ["bash_run(npm test *)"]\nask = []\ndeny = []')
        if project:
            path = project_rules_path(project.path)
            try:
                self.rules.setPlainText(path.read_text(encoding="utf-8"))
            except OSError:
                pass
        self.test_tool = QComboBox()
        self.test_tool.setEditable(True)
        self.test_tool.addItems(sorted(tool_facts()) or ["bash_run", "fs_write", "fs_read"])
        self.test_tool.setCurrentText("bash_run")
        self.test_input = QLineEdit('{"command": "npm test"}')
        test_btn = QPushButton("Would it be allowed?")
        test_btn.clicked.connect(self.run_test)
        self.test_result = QLabel()
        self.test_result.setWordWrap(True)
        self.test_result.setTextFormat(Qt.TextFormat.RichText)

        general = QWidget()
        form = QFormLayout(general)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        form.addRow("Folder", row)
        form.addRow("Name", self.name)
        img = QHBoxLayout()
        img.addWidget(self.image, 1)
        img.addWidget(self.build_btn)
        form.addRow("Sandbox image", img)
        form.addRow("", self.image_status)
        form.addRow("", self.build_progress)
        form.addRow("", self.build_log)
        form.addRow("", self.network)
        form.addRow("Memory limit", self.memory)
        form.addRow("CPU limit", self.cpus)
        form.addRow("", self.workspace_ro)
        form.addRow("", self.local)
        form.addRow("Permission mode", self.mode)

        rules_tab = QWidget()
        rl = QVBoxLayout(rules_tab)
        rl.addWidget(QLabel("Rules in <code>.agent-desk/rules.toml</code> — deny beats ask beats allow beats "
                            "the mode."))
        rl.addWidget(self.rules, 1)
        tester = QGroupBox("Tester")
        tl = QHBoxLayout(tester)
        tl.addWidget(self.test_tool)
        tl.addWidget(self.test_input, 1)
        tl.addWidget(test_btn)
        rl.addWidget(tester)
        rl.addWidget(self.test_result)

        tabs = QTabWidget()
        tabs.addTab(general, "Sandbox && permissions")
        tabs.addTab(rules_tab, "Rules")
        self.error = QLabel()
        self.error.setStyleSheet("color: #d9363e")
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(tabs, 1)
        lay.addWidget(self.error)
        lay.addWidget(bb)
        self._result: ProjectInfo | None = None
        self._image_changed(self.image.currentText())

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # image catalog -----------------------------------------------------------------------------
    def add_catalog_entry(self, entry: dict[str, Any]) -> None:
        tag = entry["tag"]
        self.catalog[tag] = entry
        if self.image.findText(tag) < 0:
            self.image.addItem(tag)

    def _image_changed(self, tag: str) -> None:
        entry = self.catalog.get(tag)
        if entry is None:
            self.image_status.setText("a local image tag (not in the catalog)")
            self.build_btn.setEnabled(False)
            return
        status = entry.get("status", "unknown")
        colour = {"built": "#2f9e44", "missing": "#d4890b"}.get(status, "#8a8f98")
        self.image_status.setText(
            f"<span style='color:{colour}'>● {status}</span> — {entry.get('description', '')}")
        self.build_btn.setEnabled(self._build_image is not None and status != "building")
        self.build_btn.setText("Rebuild" if status == "built" else "Build")

    async def build_selected(self) -> bool:
        tag = self.image.currentText()
        entry = self.catalog.get(tag)
        if entry is None or self._build_image is None:
            return False
        self.build_btn.setEnabled(False)
        self.build_progress.show()
        entry["status"] = "building"
        self._image_changed(tag)
        lines: list[str] = []

        def progress(line: str) -> None:
            lines.append(line.rstrip())
            self.build_log.setText("\n".join(lines[-3:]))

        try:
            await self._build_image(entry.get("name", tag), progress)
        except AgentDeskError as e:
            entry["status"] = "failed"
            self.build_log.setText(f"<span style='color:#d9363e'>{e.user_message()}</span>")
            return False
        finally:
            self.build_progress.hide()
        entry["status"] = "built"
        self._image_changed(tag)
        return True

    async def _browse(self) -> None:
        dlg = QFileDialog(self, "Project folder", self.folder.text())
        dlg.setFileMode(QFileDialog.FileMode.Directory)
        dlg.setOption(QFileDialog.Option.ShowDirsOnly)
        fut = asyncio.get_event_loop().create_future()
        dlg.fileSelected.connect(lambda p: fut.done() or fut.set_result(p))
        dlg.rejected.connect(lambda: fut.done() or fut.set_result(None))
        dlg.open()
        path = await fut
        dlg.deleteLater()
        if path:
            self.folder.setText(path)

    # rules ---------------------------------------------------------------------------------------
    def run_test(self) -> str:
        html = would_allow(self.rules.toPlainText(), self.mode.currentData(), self.test_tool.currentText(),
                          self.test_input.text())
        self.test_result.setText(html)
        return html

    def _check(self) -> None:
        folder = Path(self.folder.text().strip()).expanduser()
        if not self.folder.text().strip() or not folder.is_dir():
            self.error.setText(f"The folder {str(folder)!r} does not exist.")
            return
        text = self.rules.toPlainText()
        if text.strip():
            try:
                RuleSet.from_text(text)
            except AgentDeskError as e:
                self.error.setText(f"Rules: {e.user_message()}")
                return
        from ..core import new_id

        base = self.project
        self._result = ProjectInfo(
            id=base.id if base else new_id("prj_"),
            name=self.name.text().strip() or folder.name,
            path=str(folder.resolve()),
            image=self.image.currentText().strip() or "agent-desk/minimal:latest",
            permission_mode=self.mode.currentData(),
            settings={
                **(base.settings if base else {}),
                "network": self.network.isChecked(),
                "memory": self.memory.text().strip() or "2g",
                "cpus": self.cpus.value(),
                "workspace_ro": self.workspace_ro.isChecked(),
                "sandbox": "local" if self.local.isChecked() else "docker",
            },
            created_at=base.created_at if base else __import__("time").time(),
        )
        self.rules_text = text
        self.accept()

    def value(self) -> ProjectInfo | None:
        return self._result


def write_rules_file(project: ProjectInfo, text: str) -> Path | None:
    """Save the editor's rules to the project's .agent-desk/rules.toml (nothing when empty and absent)."""
    path = project_rules_path(project.path)
    if not text.strip() and not path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return path
