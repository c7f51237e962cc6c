"""Review a project file the sandbox (or a repository) can write before it is used: the rules, the hooks or an
MCP server. The change since it was last approved (the whole file when new), then approve or ignore it. Opened
with open(), never exec()."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from .._mcp import runs_where
from ._base import FutureDialog


@dataclass(frozen=True, slots=True)
class _Wording:
    """What the dialog says for one kind of subject (a new kind is one more entry in _WORDING)."""

    title: str  # {project} and {name} are filled in
    head: str  # {where} is the file, {what} the status phrase
    what: dict[str, str]  # status value -> phrase
    approve: str
    ignore: str
    foot: str


_WORDING = {
    "rules": _Wording(
        "Review the rules of {project}",
        "The permission rules in <code>{where}</code> {what}. The agent's sandbox can write that file, so until "
        "you trust them, sessions use your own rules only (and the deny and ask rules you trusted before).",
        {"new": "were never trusted (a repository may have shipped them)",
         "changed": "changed since you last trusted them", "deleted": "were deleted since you last trusted them"},
        "Trust these rules", "Ignore them",
        "Trusting takes the text shown here; a file changed after this was read is asked about again."),
    "hooks": _Wording(
        "Review the hooks of {project}",
        "The hooks in <code>{where}</code> {what}. The agent's sandbox can write that file, so they do not run "
        "until you grant them.",
        {"new": "were never granted", "changed": "changed since you granted them"},
        "Grant these hooks", "Ignore them",
        "Granting takes the text shown here; a file changed after this was read is asked about again."),
    "mcp": _Wording(
        "Review the MCP server {name} of {project}",
        "The server {name} in <code>{where}</code> runs {asks}, and {what}. It does not start until you "
        "grant it.",
        {"new": "was never granted", "changed": "changed since you granted it"},
        "Grant this server", "Ignore it",
        "Granting binds to the entry as it is now; an entry changed afterwards is asked about again."),
    "template": _Wording(
        "Review the agent template {name} of {project}",
        "The template {name} in <code>{where}</code> {what}. It sets the model (and so the price), the tools, "
        "the mode and rules of the sessions and sub-agents that run on it, so it is not offered until you "
        "approve it. What it changes is at the end.",
        {"new": "was never approved (a repository may have shipped it)", "changed": "changed since you approved it"},
        "Approve this template", "Ignore it",
        "Approving binds to the file as it is now; a file changed afterwards is asked about again."),
    "skills": _Wording(
        "Review the skills of {project}",
        "The skills in <code>{where}</code> {what}. Their names and descriptions go into every request's "
        "prompt and their text to the agent when it loads one, so they are not offered until you approve them "
        "(all of them at once: one approval covers the set).",
        {"new": "were never approved (a repository may have shipped them)",
         "changed": "changed since you approved them"},
        "Approve these skills", "Ignore them",
        "Approving binds to every SKILL.md as it is now; a skill added or changed afterwards is asked about "
        "again. Your settings limit how many reach the prompt (skills_max, skills_max_prompt_bytes)."),
    "network-list": _Wording(
        "Review the network list of {project}",
        "The repository's network list in <code>{where}</code> {what}. It widens what the sandbox may reach "
        "through the desk's proxy, so its domains are not reachable until you approve it; until then only your "
        "own list applies.",
        {"new": "was never approved (a repository may have shipped it)", "changed": "changed since you approved it"},
        "Approve this list", "Ignore it",
        "Approving binds to these patterns as they are now; one added or changed afterwards is asked about again."),
}


class ConsentDialog(FutureDialog):
    """A subject to approve (value True) or ignore (None). `consent` is the runtime's Consent."""

    def __init__(self, consent: Any, project_name: str, parent=None) -> None:
        super().__init__(parent)
        self.consent = consent
        words = _WORDING[str(consent.kind)]
        self.setWindowTitle(words.title.format(project=project_name, name=consent.name))
        self.resize(720, 480)
        lay = QVBoxLayout(self)
        where = f"{consent.project_dir}/{consent.file}"
        what = words.what.get(str(consent.status), "is not approved")
        head = QLabel(words.head.format(where=html.escape(where), what=what, name=html.escape(consent.name),
                                        asks=html.escape(runs_where(str(consent.asks)))))
        head.setWordWrap(True)
        lay.addWidget(head)
        self.diff = QPlainTextEdit()
        self.diff.setReadOnly(True)
        self.diff.setFont(QFont("monospace"))
        self.diff.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        _show_diff(self.diff, consent.diff() or "(the file is empty)")
        lay.addWidget(self.diff, 1)
        lay.addWidget(QLabel(f"<small>{words.foot}</small>"))
        bb = QDialogButtonBox()
        self.approve_btn = bb.addButton(words.approve, QDialogButtonBox.ButtonRole.AcceptRole)
        self.ignore_btn = bb.addButton(words.ignore, QDialogButtonBox.ButtonRole.RejectRole)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)


def _show_diff(view: QPlainTextEdit, diff: str) -> None:
    """The diff with added lines green and removed lines red (a new file is all additions)."""
    cursor = view.textCursor()
    plain = QTextCharFormat()
    for line in diff.splitlines(keepends=True):
        fmt = QTextCharFormat(plain)
        if line.startswith("+") and not line.startswith("+++"):
            fmt.setForeground(QColor("#2f9e44"))
        elif line.startswith("-") and not line.startswith("---"):
            fmt.setForeground(QColor("#d9363e"))
        elif line.startswith("@@"):
            fmt.setForeground(QColor("#8a8f98"))
        cursor.insertText(line, fmt)
    view.moveCursor(QTextCursor.MoveOperation.Start)
