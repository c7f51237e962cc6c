"""The window's dialogs, each opened with open() and awaited through a future (never exec())."""

from ._about import AboutDialog, ChecksDialog
from ._base import FutureDialog, ask_file
from ._consent import ConsentDialog
from ._edit_input import EditInputDialog
from ._modes import MODE_HELP
from ._project import ProjectSettingsDialog, edit_project, would_allow, write_rules_file
from ._rewind import RewindDialog
from ._rule_preview import RulePreviewDialog
from ._settings import SettingsDialog, SettingsResult, edit_settings

__all__ = [
    "MODE_HELP",
    "AboutDialog",
    "ChecksDialog",
    "ConsentDialog",
    "EditInputDialog",
    "FutureDialog",
    "ProjectSettingsDialog",
    "RewindDialog",
    "RulePreviewDialog",
    "SettingsDialog",
    "SettingsResult",
    "ask_file",
    "edit_project",
    "edit_settings",
    "would_allow",
    "write_rules_file",
]
