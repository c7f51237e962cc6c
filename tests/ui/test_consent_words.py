"""Every consent kind has its words (a kind without them was a KeyError when its review dialog opened), and
each kind's review dialog opens and says what it is about."""

from __future__ import annotations

import pytest

from desktop_app.core import ConsentKind
from desktop_app.ui._consent_words import WORDS, words_for


def test_every_kind_has_words_and_every_placeholder_is_known() -> None:
    assert set(WORDS) == set(ConsentKind)
    fill = dict(project="p", name="n", asks="in the sandbox", what="w", where="f", names="a, b")
    for kind, words in WORDS.items():
        for field in ("row", "done", "waiting", "title", "head", "approve", "ignore", "foot"):
            text = getattr(words, field)
            assert text.strip() and "{" not in text.format(**fill), (kind, field)
        assert {"new", "changed"} <= set(words.what), kind
    assert words_for("instructions") is WORDS[ConsentKind.INSTRUCTIONS]


class _Subject:
    def __init__(self, kind: ConsentKind) -> None:
        self.kind, self.name, self.status, self.asks = kind.value, "srv", "new", "sandbox"
        self.project_dir, self.file = "/tmp/proj", "AGENTS.md"

    def diff(self) -> str:
        return "+one line\n"


@pytest.mark.parametrize("kind", list(ConsentKind))
def test_each_kinds_review_dialog_opens(qtbot, kind: ConsentKind) -> None:
    from desktop_app.ui.dialogs._consent import ConsentDialog

    dlg = ConsentDialog(_Subject(kind), "proj")
    qtbot.addWidget(dlg)
    words = WORDS[kind]
    assert dlg.windowTitle() == words.title.format(project="proj", name="srv")
    assert dlg.approve_btn.text() == words.approve and "+one line" in dlg.diff.toPlainText()
