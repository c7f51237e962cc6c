"""The app's settings dialog (API key, endpoint, model, default mode, theme, the user's own MCP servers as
JSON) and the flow that saves what it returns, with the keyring and the settings file touched off the GUI
thread."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...config import Settings
from ...core import DEFAULT_MODEL, AgentDeskError, user_hooks_from_toml
from .._mcp import where_label
from ._base import FutureDialog
from ._mcp_json import check_mcp_json, servers_text, where_it_runs
from ._modes import mode_combo
from ._plugins_tab import PluginsTab

_KEY_SOURCES = {"keyring": "stored in the system keyring", "settings": "stored in the settings file",
                "env": "read from ANTHROPIC_API_KEY (the environment overrides a stored key)",
                "env-token": "read from ANTHROPIC_AUTH_TOKEN, sent as a bearer token (it overrides a stored key)"}


@dataclasses.dataclass(slots=True)
class SettingsResult:
    model: str
    base_url: str | None
    permission_mode: str
    theme: str
    api_key: str | None  # None: unchanged
    clear_key: bool = False
    mcp_servers: dict[str, Any] = dataclasses.field(default_factory=dict)  # the user's own, checked
    approval_expiry_s: float | None = None  # the default for projects; None: approvals wait
    hooks: dict[str, Any] = dataclasses.field(default_factory=dict)  # the user's own hooks, checked
    plugins_disabled: list[str] = dataclasses.field(default_factory=list)


def hooks_text(hooks: dict[str, Any]) -> str:
    """The user's hooks as the TOML the dialog edits (empty when there are none)."""
    import tomlkit

    return tomlkit.dumps(hooks) if hooks else ""


class SettingsDialog(FutureDialog):
    """The API key (keyring, or an explicit warned fallback), endpoint, model, default mode, theme, and the
    user's own MCP servers (pasted JSON, checked before it is saved)."""

    def __init__(self, settings: Settings, *, key_source: str | None, keyring_ok: bool, plugins: Any = (),
                 parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings — Agent Desk")
        self.setMinimumWidth(640)
        self._build_key(settings, key_source, keyring_ok)
        self.base_url = QLineEdit(settings.base_url or "")
        self.base_url.setPlaceholderText("https://api.anthropic.com (default)")
        self.base_url_state = QLabel()
        if settings.base_url_source() == "env":  # said here, or the field would seem to be ignored
            self.base_url_state.setText(f"In use: ANTHROPIC_BASE_URL={settings.resolved_base_url()} "
                                        "(the environment overrides this field)")
        self.base_url_state.setVisible(bool(self.base_url_state.text()))
        self.model = QLineEdit(settings.model)
        self.mode = mode_combo(settings.permission_mode)
        self.theme = QComboBox()
        for t in ("system", "light", "dark"):
            self.theme.addItem({"system": "Follow the system"}.get(t, t.capitalize()), t)
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))

        form = QFormLayout()
        form.addRow("API key", self.key)
        form.addRow("", self.key_state)
        form.addRow("", self.clear_key)
        form.addRow("", self.keyring_warning)
        form.addRow("Base URL", self.base_url)
        form.addRow("", self.base_url_state)
        form.addRow("Model", self.model)
        form.addRow("Default mode", self.mode)
        form.addRow("Theme", self.theme)
        general = QWidget()
        general.setLayout(form)
        self.tabs = QTabWidget()
        self.tabs.addTab(general, "General")
        self.tabs.addTab(self._mcp_tab(settings), "MCP servers")
        self.tabs.addTab(self._hooks_tab(settings), "Approvals && hooks")
        self.plugins = PluginsTab(plugins, settings.plugins_disabled)
        self.tabs.addTab(self.plugins, "Plugins")
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.tabs, 1)
        lay.addWidget(bb)
        self._mcp_checked = check_mcp_json("")
        self.preview_mcp()
        self.key.setFocus()  # the field a person opens the settings for first

    def _mcp_tab(self, settings: Settings) -> QWidget:
        self.mcp_json = QPlainTextEdit(servers_text(dict(settings.mcp_servers)))
        self.mcp_json.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.mcp_json.setPlaceholderText('{\n  "mcpServers": {\n    "git": {"command": "uvx", "args": '
                                         '["mcp-server-git"]}\n  }\n}')
        self.mcp_error = QLabel()
        self.mcp_error.setTextFormat(Qt.TextFormat.PlainText)  # names from the paste are data, not markup
        self.mcp_error.setWordWrap(True)
        self.mcp_error.setStyleSheet("color: #d9363e")
        self.mcp_list = QLabel()
        self.mcp_list.setTextFormat(Qt.TextFormat.PlainText)
        self.mcp_list.setWordWrap(True)
        self._mcp_timer = QTimer(self, singleShot=True, interval=250)  # checked when typing pauses
        self._mcp_timer.timeout.connect(self.preview_mcp)
        self.mcp_json.textChanged.connect(self._mcp_timer.start)
        tab = QWidget()
        lay = QVBoxLayout(tab)
        intro = QLabel("Your own MCP servers, for every project: paste your existing <code>mcpServers</code> JSON "
                       "(the whole file of Claude Desktop, Claude Code or Cursor, or just the mapping). A server runs "
                       'in the project\'s sandbox unless it says <code>"run": "sandbox+network"</code> or '
                       '<code>"run": "host"</code> (unsandboxed); a <code>url</code> server is reached over the '
                       "network. Yours need no grant.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        lay.addWidget(self.mcp_json, 1)
        lay.addWidget(self.mcp_error)
        lay.addWidget(self.mcp_list)
        return tab

    def preview_mcp(self) -> bool:
        """Check the pasted servers now: say what is wrong, or list each and where it will run."""
        self._mcp_timer.stop()
        try:
            self._mcp_checked = check_mcp_json(self.mcp_json.toPlainText())
        except AgentDeskError as e:
            self.mcp_error.setText(e.user_message())
            self.mcp_error.setStyleSheet("color: #d9363e")
            self.mcp_error.show()
            self.mcp_list.hide()
            return False
        self.mcp_error.setStyleSheet("color: #d4890b")  # warnings: saved anyway
        self.mcp_error.setVisible(bool(self._mcp_checked.warnings))
        self.mcp_error.setText("\n".join(f"⚠ {w}" for w in self._mcp_checked.warnings[:20]))
        lines = [f"• {name} — {where_label(where_it_runs(spec))}" for name, spec in self._mcp_checked.servers.items()]
        self.mcp_list.setText("\n".join(lines[:50]) + (f"\n… and {len(lines) - 50} more" if len(lines) > 50 else "")
                              if lines else "No servers of your own.")
        self.mcp_list.show()
        return True

    def _hooks_tab(self, settings: Settings) -> QWidget:
        """The default approval expiry, and the user's own hooks as TOML (checked before saving)."""
        self.expiry = QSpinBox()
        self.expiry.setRange(0, 7 * 24 * 3600)
        self.expiry.setSuffix(" s")
        self.expiry.setSpecialValueText("never: approvals wait until answered")
        self.expiry.setValue(int(settings.approval_expiry_s or 0))
        self.hooks_toml = QPlainTextEdit(hooks_text(settings.hooks))
        self.hooks_toml.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.hooks_toml.setPlaceholderText('[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "./guard.sh"\n'
                                           'timeout = 10\n\n[[PostToolUse]]\nmatcher = "fs_*"\ncommand = "..."')
        self.hooks_error = QLabel()
        self.hooks_error.setTextFormat(Qt.TextFormat.PlainText)
        self.hooks_error.setWordWrap(True)
        self.hooks_error.setStyleSheet("color: #d9363e")
        tab = QWidget()
        lay = QVBoxLayout(tab)
        form = QFormLayout()
        form.addRow("Approvals expire after", self.expiry)
        lay.addLayout(form)
        intro = QLabel("Your hooks, for every project: a command run <b>inside the sandbox</b> before "
                       "(PreToolUse) or after (PostToolUse) each matching tool, with the call as JSON on stdin. "
                       "Exit code 2 (or {\"decision\": \"deny\"}) denies the call with its message; other "
                       "output is added to the result. A failing PreToolUse hook denies the call.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        lay.addWidget(self.hooks_toml, 1)
        lay.addWidget(self.hooks_error)
        self._hooks: dict[str, Any] = {}
        return tab

    def check_hooks(self) -> bool:
        """Read the hooks TOML now: say what is wrong, or keep it for `value()`."""
        import tomllib

        text = self.hooks_toml.toPlainText()
        try:
            user_hooks_from_toml(text, "Settings: hooks")
            self._hooks = tomllib.loads(text)
        except AgentDeskError as e:
            self.hooks_error.setText(e.user_message())
            return False
        self.hooks_error.setText("")
        return True

    def _check(self) -> None:
        if not self.preview_mcp():
            self.tabs.setCurrentIndex(1)
            return
        if not self.check_hooks():
            self.tabs.setCurrentIndex(2)
            return
        self.accept()

    def _build_key(self, settings: Settings, key_source: str | None, keyring_ok: bool) -> None:
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("sk-ant-…  (leave empty to keep the current key)")
        self.key_state = QLabel(f"Current key: {_KEY_SOURCES.get(key_source or '', 'not set')}")
        self.clear_key = QCheckBox("Forget the stored key")
        self.keyring_warning = QLabel(
            "⚠ No keyring backend is available: the key will be written to "
            f"{settings.path or 'the settings file'} (readable only by you).\n"
            "Install and unlock a keyring (gnome-keyring, KWallet) to keep it out of files.")
        self.keyring_warning.setWordWrap(True)
        self.keyring_warning.setStyleSheet("color: #d4890b")
        self.keyring_warning.setVisible(not keyring_ok)

    def value(self) -> SettingsResult:
        return SettingsResult(
            model=self.model.text().strip() or DEFAULT_MODEL,
            base_url=self.base_url.text().strip() or None,
            permission_mode=self.mode.currentData(),
            theme=self.theme.currentData(),
            api_key=self.key.text().strip() or None,
            clear_key=self.clear_key.isChecked(),
            mcp_servers=dict(self._mcp_checked.servers),
            approval_expiry_s=float(self.expiry.value()) or None,
            hooks=dict(self._hooks),
            plugins_disabled=self.plugins.disabled(),
        )


async def edit_settings(settings: Settings, key_source: str | None,
                        parent=None) -> tuple[SettingsResult, str | None] | None:
    """Ask, then save into `settings` (and its file, and the keyring). Returns what was saved and where
    the API key now comes from; None when cancelled."""
    from ...config import clear_api_key, keyring_available, resolve_api_key, store_api_key

    loop = asyncio.get_running_loop()
    keyring_ok = await loop.run_in_executor(None, keyring_available)
    plugins = await loop.run_in_executor(None, _plugins, settings)
    dlg = SettingsDialog(settings, key_source=key_source, keyring_ok=keyring_ok, plugins=plugins, parent=parent)
    result = await dlg.ask()
    dlg.deleteLater()
    if result is None:
        return None
    s = settings
    s.model, s.base_url, s.permission_mode, s.theme = (result.model, result.base_url,
                                                       result.permission_mode, result.theme)
    s.mcp_servers = result.mcp_servers
    s.approval_expiry_s, s.hooks = result.approval_expiry_s, result.hooks
    s.plugins_disabled = result.plugins_disabled
    if result.clear_key:
        await loop.run_in_executor(None, clear_api_key, s)
        key_source = None
    if result.api_key:
        await loop.run_in_executor(None, store_api_key, s, result.api_key)
    if s.path is not None:
        await loop.run_in_executor(None, s.save)
    # the key in use, which ANTHROPIC_API_KEY still overrides when it is set
    key = await loop.run_in_executor(None, resolve_api_key, s)
    return result, key.source if key else None


def _plugins(settings: Settings) -> list[Any]:
    """The installed plugins as the runtime finds them (imports them: off the GUI thread)."""
    from ...runtime import tools_with_plugins

    return tools_with_plugins(settings)[1].found
