"""The inbox's questions and plans: the model's `ask_user` question (with its choices) and its
`exit_plan_mode` plan, rendered as Markdown, answered with core's Answer. One card at a time, oldest first."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ...core import Answer, PermissionMode, QuestionAnswered, QuestionAsked, asked_by, visible
from .._bridge import EventBridge

TitleOf = Callable[[str], str]  # session id -> the title the window shows for it

# What the model wrote is shown, never followed: no HTML inside the Markdown, no links opened, no
# resource (an image path, a file: URL) loaded.
_MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML


class _InertBrowser(QTextBrowser):
    """A QTextBrowser that loads nothing: `![x](/etc/passwd)` stays a broken image, not a read file."""

    def loadResource(self, _type: int, _url) -> object:
        return None


class QuestionsPanel(QFrame):
    """The questions and plans waiting for the person, across sessions; the oldest is shown."""

    answered = Signal(str, str, object)  # question id, session id, Answer
    countChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("QuestionsPanel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.waiting: list[QuestionAsked] = []
        self.title_of: TitleOf = lambda sid: sid[-8:]
        self._build()
        self._show()

    def _build(self) -> None:
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.body = _InertBrowser()
        self.body.setOpenLinks(False)
        self.body.setOpenExternalLinks(False)
        self.choices = QHBoxLayout()
        self.reply = QLineEdit()
        self.modes = QComboBox()
        for m in PermissionMode:
            if m is not PermissionMode.PLAN:
                self.modes.addItem(f"then run in mode {m.value}", m.value)
        self.send_btn = QPushButton("Send answer")
        self.approve_btn = QPushButton("Approve plan")
        self.reject_btn = QPushButton("Reject with note")
        self.send_btn.clicked.connect(self._send)
        self.reply.returnPressed.connect(self._send)
        self.approve_btn.clicked.connect(self._approve)
        self.reject_btn.clicked.connect(self._reject)
        actions = QHBoxLayout()
        for w in (self.modes, self.approve_btn):
            actions.addWidget(w)
        actions.addStretch(1)
        for w in (self.reject_btn, self.send_btn):
            actions.addWidget(w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.header)
        lay.addWidget(self.body, 1)
        lay.addLayout(self.choices)
        lay.addWidget(self.reply)
        lay.addLayout(actions)

    # feeding -----------------------------------------------------------------------------------
    def attach(self, bridge: EventBridge, title_of: TitleOf | None = None) -> None:
        if title_of is not None:
            self.title_of = title_of
        bridge.questionAsked.connect(self.add)
        bridge.questionAnswered.connect(self._on_answered)

    def add(self, ev: QuestionAsked) -> None:
        if any(q.question_id == ev.question_id for q in self.waiting):
            return
        self.waiting.append(ev)
        self._show()

    def remove(self, question_id: str) -> None:
        self.waiting = [q for q in self.waiting if q.question_id != question_id]
        self._show()

    def _on_answered(self, ev: QuestionAnswered) -> None:
        self.remove(ev.question_id)  # answered here, at a terminal, or by nobody

    @property
    def current(self) -> QuestionAsked | None:
        return self.waiting[0] if self.waiting else None

    # showing -----------------------------------------------------------------------------------
    def _show(self) -> None:
        q = self.current
        self.setVisible(q is not None)
        self.countChanged.emit(len(self.waiting))
        self._clear_choices()
        if q is None:
            return
        plan = q.kind == "plan"
        more = f" — {len(self.waiting) - 1} more waiting" if len(self.waiting) > 1 else ""
        what = "Plan to review" if plan else "The agent asks"
        # a sub-agent's question is named by the desk's labels (template, number, task), its parent's title
        # beside it: never by the child's own session title alone
        who = asked_by(q.meta or {})
        where = self.title_of(str((q.meta or {}).get("parent_session_id") or q.session_id))
        by = f" · asked by {html.escape(who)}" if who else ""
        self.header.setText(f"<b>{what}</b> · {html.escape(visible(where))}{by}{more}")
        if plan:
            self.body.document().setMarkdown(visible(q.text), _MARKDOWN)
        else:
            self.body.setPlainText(visible(q.text))
        for i, choice in enumerate(q.choices, 1):
            btn = QPushButton(f"{i}. {visible(choice)}")
            btn.clicked.connect(lambda _=False, c=choice: self._answer(Answer(text=c)))
            self.choices.addWidget(btn)
        self.reply.clear()
        self.reply.setPlaceholderText("A note for the agent (sent with a reject)" if plan else
                                      "Your answer (or pick a choice above)")
        for w in (self.modes, self.approve_btn, self.reject_btn):
            w.setVisible(plan)
        self.send_btn.setVisible(not plan)

    def focus_answer(self) -> None:
        """The focus where the answer goes: a plan's Approve, a question's first choice or its answer field."""
        q = self.current
        if q is not None and q.kind == "plan":
            self.approve_btn.setFocus()
        elif self.choices.count() and self.choices.itemAt(0).widget() is not None:
            self.choices.itemAt(0).widget().setFocus()
        else:
            self.reply.setFocus()

    def _clear_choices(self) -> None:
        while self.choices.count():
            w = self.choices.takeAt(0).widget()
            if w is not None:
                w.deleteLater()

    # answering ---------------------------------------------------------------------------------
    def _answer(self, answer: Answer) -> None:
        q = self.current
        if q is None:
            return
        self.answered.emit(q.question_id, q.session_id, answer)
        self.remove(q.question_id)

    def _send(self) -> None:
        q = self.current
        text = self.reply.text().strip()
        if q is not None and q.kind == "question" and text:
            self._answer(Answer(text=text))

    def _approve(self) -> None:
        self._answer(Answer(approved=True, mode=str(self.modes.currentData()), note=self.reply.text().strip()))

    def _reject(self) -> None:
        self._answer(Answer(approved=False, note=self.reply.text().strip() or "Rejected; revise the plan."))

