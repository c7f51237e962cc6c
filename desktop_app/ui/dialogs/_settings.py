"""The app's settings dialog (API key, endpoint, model, default mode, theme) and the flow that saves
what it returns, with the keyring and the settings file touched off the GUI thread."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout

from ...core import DEFAULT_MODEL
from ._base import FutureDialog
from ._modes import mode_combo

_KEY_SOURCES = {"keyring": "stored in the system keyring", "settings": "stored in the settings file",
                "env": "read from ANTHROPIC_API_KEY (the environment overrides a stored key)"}


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
        self.theme.setCurrentIndex(max(0, self.theme.findData(getattr(settings, "theme", "system"))))

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
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(bb)

    def _build_key(self, settings: Any, key_source: str | None, keyring_ok: bool) -> None:
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("sk-ant-…  (leave empty to keep the current key)")
        self.key_state = QLabel(f"Current key: {_KEY_SOURCES.get(key_source or '', 'not set')}")
        self.clear_key = QCheckBox("Forget the stored key")
        self.keyring_warning = QLabel(
            "⚠ No keyring backend is available: the key will be written to "
            f"{getattr(settings, 'path', '') or 'the settings file'} (readable only by you).\n"
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
        )


async def edit_settings(settings: Any, key_source: str | None, parent=None) -> tuple[SettingsResult, str | None] | None:
    """Ask, then save into `settings` (and its file, and the keyring). Returns what was saved and where
    the API key now comes from; None when cancelled."""
    from ...config import clear_api_key, keyring_available, resolve_api_key, store_api_key

    loop = asyncio.get_running_loop()
    keyring_ok = await loop.run_in_executor(None, keyring_available)
    dlg = SettingsDialog(settings, key_source=key_source, keyring_ok=keyring_ok, parent=parent)
    result = await dlg.ask()
    dlg.deleteLater()
    if result is None:
        return None
    s = settings
    s.model, s.base_url, s.permission_mode, s.theme = (result.model, result.base_url,
                                                       result.permission_mode, result.theme)
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
