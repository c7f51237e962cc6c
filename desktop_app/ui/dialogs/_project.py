"""The project settings dialog (folder, sandbox image with its build, limits, mode, a rules editor with a
'would it be allowed?' tester, and the MCP servers), and the flow that opens it with the image catalog."""

from __future__ import annotations

import asyncio
import html
import json
import logging
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...config import Settings
from ...core import (
    DEFAULT_IMAGE,
    DEFAULT_TEMPLATE,
    AgentDeskError,
    ConfigError,
    ConsentKind,
    McpServerInfo,
    PermissionMode,
    PermissionPolicy,
    ProjectInfo,
    ProjectSettings,
    Risk,
    RuleSet,
    ToolFacts,
    call_risk,
    new_id,
    project_rules_path,
    visible,
)
from ...runtime import Consent, approve
from ...runtime import consents as consents_of
from .._tasks import BackgroundTasks
from ._base import FutureDialog, ask_file
from ._mcp_section import McpServersSection
from ._modes import mode_combo
from ._network_section import NetworkSection
from ._project_image import (
    ImageBuilder,
    ImageSection,
    ProjectImageBuilder,
    build_image,
    build_project_image,
    image_catalog,
    project_image_entry,
)
from ._tools_section import ToolsHooksSection, merged_settings

log = logging.getLogger(__name__)
# the `workspace` setting: how the project folder reaches the container (sandbox/_config.py syncs_workspace)
WORKSPACE_CHOICES = (
    ("auto", "Mounted (fast; the sandbox can read the folder's host path) — synced on a remote engine"),
    ("synced", "A synced copy (hides the host path; synced before and after each call)"),
    ("bind", "Mounted, even on a tcp:// engine (one on this machine that sees the folder)"),
)



def tool_facts() -> dict[str, ToolFacts]:
    return {name: facts for name, (facts, _risk) in _builtin_tools().items()}


def _builtin_tools() -> dict[str, tuple[ToolFacts, Risk]]:
    try:
        from ...runtime import builtin_tools

        return {t.name: (ToolFacts(t.name, t.group, t.read_only), Risk.of(t.risk)) for t in builtin_tools()}
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
    facts, tool_risk = _builtin_tools().get(tool) or (ToolFacts(tool), Risk.LOW)
    policy = PermissionPolicy(mode=mode, rules=rules)
    d = policy.resolve_ask(policy.evaluate(facts, data))
    colour = {"allow": "#2f9e44", "ask": "#d4890b", "deny": "#d9363e"}[d.action.value]
    p = d.provenance
    # The risk and the reason the executor records, and the inbox and the CLI show, for this call.
    risk = call_risk(facts.name, tool_risk, d)
    return (f"<b style='color:{colour}'>{d.action.value.upper()}</b> — risk <b>{risk}</b>: "
            f"{html.escape(visible(d.reason))}"
            f"<br><small>decided by {html.escape(p.kind)}: <code>{html.escape(visible(p.detail))}</code></small>")


class ProjectSettingsDialog(FutureDialog, ImageSection):
    """Folder, sandbox image (catalog with build status and Build, or any local tag), network, limits,
    workspace mode, permission mode, and a rules editor with a tester."""

    def __init__(
        self,
        project: ProjectInfo | None,
        *,
        catalog: list[dict[str, Any]] | None = None,
        build_image: ImageBuilder | None = None,
        build_project_image: ProjectImageBuilder | None = None,
        default_mode: str = PermissionMode.ASK.value,
        default_image: str = DEFAULT_IMAGE,
        mcp_servers: list[McpServerInfo] | None = None,
        parent=None,
        default_expiry: float | None = None,
        consents: list[Consent] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("New project" if project is None else f"Project settings — {project.name}")
        self.resize(720, 600)
        self.project = project
        self._build_image = build_image
        self._build_project_image = build_project_image
        self._tasks = BackgroundTasks()
        self.catalog: dict[str, dict[str, Any]] = {}
        st = dict(project.settings) if project else {}
        self._build_folder(project)
        self._build_image_picker(project, catalog, default_image)
        self._build_limits(st, project.permission_mode if project else default_mode)
        self._build_rules(project)
        self.template, self.template_about = template_picker(project, str(ProjectSettings.of(st).template or ""))
        if consents is None and project is not None:  # read here when the caller did not read them off the loop
            consents = _read_consents(project)
        mcp_consents = [c for c in consents or () if c.kind is ConsentKind.MCP]
        hooks = next((c for c in consents or () if c.kind is ConsentKind.HOOKS), None)
        reread = (lambda: consents_of(project, ConsentKind.MCP)) if project is not None else None
        self.mcp = McpServersSection(st, mcp_servers, project.path if project else "", consents=mcp_consents,
                                     reread=reread)
        self.tabs = tabs = QTabWidget()
        tabs.addTab(self._general_tab(), "Sandbox && permissions")
        tabs.addTab(self._rules_tab(), "Rules")
        tabs.addTab(self.mcp, "MCP servers")
        self.reach = ToolsHooksSection(st, project.path if project else "", default_expiry=default_expiry,
                                       hooks=hooks)
        tabs.addTab(self.reach, "Tools && hooks")
        repository = next((c for c in consents or () if c.kind is ConsentKind.NETWORK), None)
        self.net = NetworkSection(st, repository=repository)
        tabs.addTab(self.net, "Network")
        self.error = QLabel()
        self.error.setStyleSheet("color: #d9363e")
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.save_btn = bb.button(QDialogButtonBox.StandardButton.Save)
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(tabs, 1)
        lay.addWidget(self.error)
        lay.addWidget(bb)
        self._result: ProjectInfo | None = None
        self._image_changed(self.image.currentText())

    # building ----------------------------------------------------------------------------------
    def _build_folder(self, project: ProjectInfo | None) -> None:
        self.folder = QLineEdit(project.path if project else "")
        self.folder.setPlaceholderText("/path/to/your/project")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(lambda: self._tasks.spawn(self._browse()))
        self.name = QLineEdit(project.name if project else "")
        self.name.setPlaceholderText("defaults to the folder's name")

    def _build_limits(self, st: dict[str, Any], mode: str) -> None:
        known = ProjectSettings.of(st)
        self.memory = QLineEdit(str(known.memory))
        self.cpus = QDoubleSpinBox()
        self.cpus.setRange(0.1, 64)
        self.cpus.setSingleStep(0.5)
        self.cpus.setValue(float(known.cpus))
        self.local = QCheckBox("Run tools on this machine, without a container (local sandbox: UNSAFE)")
        self.local.setToolTip("For development without Docker: commands run on your machine as you.")
        self.local.setChecked(known.sandbox == "local")
        self.local.setStyleSheet("QCheckBox:checked { color: #d9363e; }")
        self.workspace_ro = QCheckBox("Mount the workspace read-only")
        self.workspace_ro.setChecked(bool(known.workspace_ro))
        self.workspace = QComboBox()
        for value, label in WORKSPACE_CHOICES:
            self.workspace.addItem(label, value)
        self.workspace.setCurrentIndex(max(0, self.workspace.findData(known.workspace)))
        self.workspace.setToolTip("A mounted folder is fast, and the sandbox can read its host path (the kernel "
                                  "shows a mount's source in /proc/self/mountinfo). A synced copy hides the path: "
                                  "the folder is copied into a volume and synced before and after each call, "
                                  "which costs time on large folders (about 1 s a call for 10,000 files).")
        self.workspace_where = QLabel()
        self.workspace.currentIndexChanged.connect(lambda _i: self._show_workspace_where(st))
        self._show_workspace_where(st)
        self.mode = mode_combo(mode)

    def _workspace_setting(self, base: ProjectInfo | None) -> dict[str, str]:
        """The `workspace` setting when it says something: another than the default, or one set before."""
        value = self.workspace.currentData()
        return {"workspace": value} if value != "auto" or "workspace" in (base.settings if base else {}) else {}

    def _show_workspace_where(self, st: dict[str, Any]) -> None:
        from ...runtime import workspace_where  # "remote engine, synced workspace (tcp://…)" on a remote engine

        where = workspace_where({**st, "workspace": self.workspace.currentData()})
        self.workspace_where.setText(where or "the project folder, mounted into the container")

    def _build_rules(self, project: ProjectInfo | None) -> None:
        self.rules = QPlainTextEdit()
        self.rules.setPlaceholderText('[permissions]\nallow = ["bash_run(npm test *)"]\nask = []\ndeny = []')
        self.rules_warning = QLabel()
        self.rules_warning.setWordWrap(True)
        self.rules_warning.setStyleSheet("color: #d4890b")
        self.rules_warning.hide()
        self.loaded_rules = ""  # what the editor started with: saved (and trusted) only when edited
        if project:
            self._load_rules(project)
        self.test_tool = QComboBox()
        self.test_tool.setEditable(True)
        self.test_tool.addItems(sorted(tool_facts()) or ["bash_run", "fs_write", "fs_read"])
        self.test_tool.setCurrentText("bash_run")
        self.test_input = QLineEdit('{"command": "npm test"}')
        self.test_btn = QPushButton("Would it be allowed?")
        self.test_btn.clicked.connect(self.run_test)
        self.test_result = QLabel()
        self.test_result.setWordWrap(True)
        self.test_result.setTextFormat(Qt.TextFormat.RichText)

    def _load_rules(self, project: ProjectInfo) -> None:
        """The rules file, read without following links; an untrusted one is said to be so."""
        from ...runtime import project_rules_trust

        try:
            trust = project_rules_trust(project.path)
        except AgentDeskError as e:
            self.rules_warning.setText(f"⚠ {e.user_message()}")
            self.rules_warning.show()
            return
        self.loaded_rules = trust.current or ""
        self.rules.setPlainText(self.loaded_rules)
        if not trust.ok:
            self.rules_warning.setText(
                "⚠ These rules are not trusted (the sandbox can write this file): sessions do not use them. "
                "Review the change from the banner; saving an edit here trusts the whole text.")
            self.rules_warning.show()

    def _general_tab(self) -> QWidget:
        general = QWidget()
        form = QFormLayout(general)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(self.browse)
        form.addRow("Folder", row)
        form.addRow("Name", self.name)
        img = QHBoxLayout()
        img.addWidget(self.image, 1)
        img.addWidget(self.build_btn)
        form.addRow("Sandbox image", img)
        running = QHBoxLayout()
        running.addWidget(self.build_progress, 1)
        running.addWidget(self.build_elapsed)
        running.addWidget(self.cancel_build_btn)
        form.addRow("", self.image_status)
        form.addRow("", self.image_files)
        form.addRow("", running)
        form.addRow("", self.build_log)
        form.addRow("Memory limit", self.memory)
        form.addRow("CPU limit", self.cpus)
        form.addRow("", self.workspace_ro)
        form.addRow("Workspace", self.workspace)
        form.addRow("", self.workspace_where)
        form.addRow("", self.local)
        form.addRow("Permission mode", self.mode)
        form.addRow("Agent template", self.template)
        form.addRow("", self.template_about)
        return general

    def _rules_tab(self) -> QWidget:
        rules_tab = QWidget()
        rl = QVBoxLayout(rules_tab)
        rl.addWidget(QLabel("Rules in <code>.agent-desk/rules.toml</code> — deny beats ask beats allow beats "
                            "the mode."))
        rl.addWidget(self.rules_warning)
        rl.addWidget(self.rules, 1)
        tester = QGroupBox("Tester")
        tl = QHBoxLayout(tester)
        tl.addWidget(self.test_tool)
        tl.addWidget(self.test_input, 1)
        tl.addWidget(self.test_btn)
        rl.addWidget(tester)
        rl.addWidget(self.test_result)
        return rules_tab

    async def _browse(self) -> None:
        path = await ask_file(self, "Project folder", self.folder.text(), folder=True)
        if path:
            self.folder.setText(path)

    # rules and the result ----------------------------------------------------------------------
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
        for problem in (self.reach.problem(), self.net.problem()):
            if problem:
                self.error.setText(problem)
                return
        result = self._project_from_form(folder)
        decisions = [*self.mcp.decisions(), *self.reach.decisions()]
        if not decisions:
            self._saved(result, text, None)
            return
        self.saving = self._tasks.spawn(self._save_with_consents(result, text, decisions))

    async def _save_with_consents(self, result: ProjectInfo, text: str, decisions: list[tuple[Consent, bool]]) -> None:
        """The grants are written on a worker thread (a file under the user's config, locked): the window keeps
        answering meanwhile, and Save waits for them."""
        self.save_btn.setEnabled(False)
        self.error.setText("Saving the grants…")
        try:
            problem = await asyncio.to_thread(_apply_consents, result, decisions)
        finally:
            self.save_btn.setEnabled(True)
        self._saved(result, text, problem)

    def _saved(self, result: ProjectInfo, text: str, problem: str | None) -> None:
        if problem:
            self.error.setText(problem)
            return
        self.error.clear()
        self._result = result
        self.rules_text = text
        self.accept()

    def _project_from_form(self, folder: Path) -> ProjectInfo:
        base = self.project
        return ProjectInfo(
            id=base.id if base else new_id("prj_"),
            name=self.name.text().strip() or folder.name,
            path=str(folder.resolve()),
            image=self._chosen_image(),
            permission_mode=self.mode.currentData(),
            settings=merged_settings({
                **{k: v for k, v in (base.settings if base else {}).items() if k != "project_image"},
                **self._project_image_setting(),
                **self.net.values(),
                "memory": self.memory.text().strip() or "2g",
                "cpus": self.cpus.value(),
                "workspace_ro": self.workspace_ro.isChecked(),
                **self._workspace_setting(base),
                "sandbox": "local" if self.local.isChecked() else "docker",
                **self._template_setting(base),
                **self.mcp.values(),
            }, self.reach.values()),
            created_at=base.created_at if base else time.time(),
        )

    def value(self) -> ProjectInfo | None:
        return self._result

    def stop_following_builds(self) -> None:
        """The dialog closes: a build it started goes on (the status bar shows it), the dialog stops showing it."""
        self._build_tick.stop()
        self._tasks.cancel()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self.project is None:  # a new project is about its folder first
            self.folder.setFocus()

    def _template_setting(self, base: ProjectInfo | None) -> dict[str, str]:
        """The picked template; nothing written while the default stays picked and none was set before."""
        chosen = self.template.currentData() or DEFAULT_TEMPLATE
        had = base is not None and "template" in base.settings
        return {"template": chosen} if had or chosen != DEFAULT_TEMPLATE else {}


def template_picker(project: ProjectInfo | None, current: str) -> tuple[QComboBox, QLabel]:
    """The project's agent template: built in, the user's, the project's (each said where it comes from),
    and a line saying what the chosen one offers and how it narrows the permissions (it never widens them)."""
    from ...runtime import load_agent_templates

    catalog = load_agent_templates(project)
    combo, about = QComboBox(), QLabel()
    about.setWordWrap(True)
    for name in catalog.names:
        t = catalog.templates[name]
        where = "built in" if t.source == "built-in" else t.source.split(":", 1)[0]
        combo.addItem(f"{name} ({where})", name)
        combo.setItemData(combo.count() - 1, t.summary(), Qt.ItemDataRole.ToolTipRole)
    for name in sorted(catalog.waiting):  # shown, not pickable: a repository's template waits for approval
        combo.addItem(f"{name} (project, waits for your approval)", name)
        item = combo.model().item(combo.count() - 1)
        if item is not None:
            item.setEnabled(False)
        combo.setItemData(combo.count() - 1, "Approve it first (the banner's Review…, or agent-desk consent "
                                             "approve --kind template): until then it is not offered",
                          Qt.ItemDataRole.ToolTipRole)
    if current and current not in catalog.templates and current not in catalog.waiting:  # kept, said missing
        combo.addItem(f"{current} (not found)", current)
    combo.setCurrentIndex(max(0, combo.findData(current or DEFAULT_TEMPLATE)))
    problems = "".join(f"<br><span style='color:#d9363e'>⚠ {html.escape(p)}</span>" for p in catalog.problems)

    def show(_i: int) -> None:
        t = catalog.templates.get(combo.currentData())
        text = html.escape(t.summary()) if t else (
            "This project template waits for your approval: sessions will not open on it until you approve it."
            if combo.currentData() in catalog.waiting else
            "This template is not found: sessions will not open until it is.")
        about.setText(f"<small>{text}; a template only ever narrows this project's permissions.</small>{problems}")

    combo.currentIndexChanged.connect(show)
    show(0)
    return combo, about


def write_rules_file(project: ProjectInfo, text: str) -> Path | None:
    """Save the editor's rules to the project's .agent-desk/rules.toml without following links, trusted as
    written (nothing when empty and absent)."""
    from ...runtime import write_project_rules

    if not text.strip() and not project_rules_path(project.path).exists():
        return None
    return write_project_rules(project.path, text if text.endswith("\n") else text + "\n")


async def edit_project(project: ProjectInfo | None, settings: Settings | None, parent=None, *,
                       mcp_servers: list[McpServerInfo] | None = None, bridge: Any = None) -> ProjectInfo | None:
    """Ask for a new project (`project` None) or changes to one; on save, write its rules file (off
    the GUI thread). `mcp_servers` is what the project's runtime reports (None: not started), and the MCP
    tab follows `bridge`'s McpServersChanged. Returns the project to store, or None when cancelled."""
    catalog = await image_catalog()
    own = await asyncio.get_running_loop().run_in_executor(None, project_image_entry, project) if project else None
    consents = await asyncio.to_thread(_read_consents, project) if project else None
    defaults = settings if settings is not None else Settings()  # no settings: the declared defaults
    dlg = ProjectSettingsDialog(
        project, catalog=[*catalog, *([own] if own else [])], build_image=build_image,
        build_project_image=build_project_image, default_mode=defaults.permission_mode,
        default_image=defaults.default_image, mcp_servers=mcp_servers, parent=parent,
        default_expiry=defaults.approval_expiry_s, consents=consents)
    if bridge is not None and project is not None:
        dlg.mcp.follow(bridge, project.id)
    try:
        result = await dlg.ask()
    finally:
        dlg.mcp.stop_following()
        dlg.stop_following_builds()
    rules_text = getattr(dlg, "rules_text", "")
    dlg.deleteLater()
    # Unedited rules are not written back: saving other settings must not trust a file nobody reviewed.
    if result is not None and _normal(rules_text) != _normal(dlg.loaded_rules):
        await asyncio.get_running_loop().run_in_executor(None, write_rules_file, result, rules_text)
    return result


def _apply_consents(project: ProjectInfo, decisions: list[tuple[Consent, bool]]) -> str | None:
    """Record the grants given or taken back in the MCP and hooks tabs (consent.json, out of the sandbox's
    reach), each bound to what was shown; one changed since is refused, and the sentence saying so returned.
    Blocking: the dialog runs it on a worker thread."""
    for consent, revoke in decisions:
        try:
            project.settings = approve(project, consent, revoke=revoke)
        except AgentDeskError as e:
            return f"The project's {consent.label}: {e.user_message()}"
    return None


def _read_consents(project: ProjectInfo) -> list[Consent] | None:
    """The project's hooks and MCP servers against the person's approvals; None (the dialog reads them itself,
    and shows what is wrong) when a file cannot be read."""
    try:
        return [*consents_of(project, ConsentKind.HOOKS), *consents_of(project, ConsentKind.MCP),
                *consents_of(project, ConsentKind.NETWORK)]
    except AgentDeskError:
        return None


def _normal(text: str) -> str:
    return text if not text.strip() or text.endswith("\n") else text + "\n"
