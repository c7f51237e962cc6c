"""The window's side of consent: when a session of a project is shown whose rules, hooks, MCP servers, templates
or skills wait for the person's approval (new, or changed since approved), a banner row per subject says so and
offers the review (the one consent dialog, with the diff) with approve / ignore. Every kind goes the same way:
`consents()` reads them, `approve()` records exactly what was shown."""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..core import AgentDeskError, ConsentKind, ProjectInfo
from ..runtime import Consent, approve, consents
from . import dialogs
from ._consent_words import words_for
from ._mcp import runs_where

log = logging.getLogger(__name__)
BANNER_KEY = "rules-trust"  # the rules' row; the others are "consent-<kind>-<name>"

# (the project, the subject approved, the project's settings after it) -> whatever the window does then
Applied = Callable[[ProjectInfo, Consent, dict[str, Any]], Awaitable[Any]]


def _key(consent: Consent) -> str:
    return BANNER_KEY if consent.kind is ConsentKind.RULES else f"consent-{consent.kind.value}-{consent.name}"


class ConsentBanner:
    """Reads a project's subjects against the person's approvals (off the GUI thread) and shows a row for each
    one waiting; `applied` hands an approval to the window (reload the rules, reopen idle sessions)."""

    def __init__(self, window: Any, spawn: Callable[[Awaitable[Any]], Any], applied: Applied | None = None) -> None:
        self.window = window
        self.spawn = spawn
        self.applied = applied
        self.waiting: dict[str, list[Consent]] = {}  # project id -> its subjects waiting, as read
        self.ignored: set[tuple[str, str]] = set()  # (project id, row key) dismissed in this run
        self.dialog: dialogs.ConsentDialog | None = None

    async def check(self, project: ProjectInfo) -> list[Consent] | None:
        """Read the project's subjects against the records and show (or clear) their rows; the subjects waiting,
        or None when a file could not be read (the banner says why)."""
        try:
            found = await asyncio.to_thread(consents, project)
        except AgentDeskError as e:  # e.g. a link planted at the rules file: refused, and said so
            self.window.banner.set_item(BANNER_KEY, f"⚠ {html.escape(e.user_message())}")
            return None
        waiting = [c for c in found if not c.ok]
        for old in self.waiting.get(project.id, []):
            if all(_key(c) != _key(old) for c in waiting):
                self.window.banner.clear_item(_key(old))
        if not any(c.kind is ConsentKind.RULES for c in waiting):
            self.window.banner.clear_item(BANNER_KEY)  # a refusal said before, now gone
        self.waiting[project.id] = waiting
        for c in waiting:
            self._show(project, c)
        return waiting

    def _show(self, project: ProjectInfo, consent: Consent) -> None:
        key = _key(consent)
        if (project.id, key) in self.ignored:
            self.window.banner.clear_item(key)
            return
        words = words_for(consent.kind)
        what = words.status(consent.status.value)
        text = words.row.format(project=html.escape(project.name), name=html.escape(consent.name),
                                asks=html.escape(runs_where(str(consent.asks))), what=what)
        self.window.banner.set_item(key, f"⚠ {text}", [
            ("Review…", lambda: self.spawn(self.review(project, consent.kind, consent.name))),
            ("Ignore", lambda: self.ignore(project, consent))])

    def ignore(self, project: ProjectInfo, consent: Consent | None = None) -> None:
        """Dismiss a row for this run (the rules' row when none is named); the subject stays unapproved."""
        key = _key(consent) if consent is not None else BANNER_KEY
        self.ignored.add((project.id, key))
        self.window.banner.clear_item(key)

    async def review(self, project: ProjectInfo, kind: ConsentKind = ConsentKind.RULES, name: str = "") -> bool:
        """Show the subject's diff; on approve, record exactly what was shown and hand it to the window."""
        consent = next((c for c in self.waiting.get(project.id, []) if c.kind is kind and c.name == name), None)
        if consent is None:
            waiting = await self.check(project) or []
            consent = next((c for c in waiting if c.kind is kind and c.name == name), None)
        if consent is None:
            return False
        self.dialog = dialogs.ConsentDialog(consent, project.name, parent=self.window)
        try:
            answer = await self.dialog.ask()
        finally:
            self.dialog.deleteLater()
            self.dialog = None
        if answer is None:
            self.ignore(project, consent)
            return False
        try:
            settings = await asyncio.to_thread(approve, project, consent)
        except AgentDeskError as e:  # changed while it was shown, or cannot be used: not approved, and said so
            self.window.banner.set_item(_key(consent), f"⚠ Not approved: {html.escape(e.user_message())}")
            return False
        if self.applied is not None:
            await self.applied(project, consent, settings)
        self.window.conversation.add_notice(words_for(kind).done.format(project=project.name, name=consent.name))
        await self.check(project)  # a file changed while it was reviewed is asked about again
        return True

    def notice_for(self, project: ProjectInfo) -> str | None:
        """What a session opening now should say about its project's unapproved subjects, if anything."""
        waiting = self.waiting.get(project.id)
        if not waiting:
            return None
        said = [words_for(k).waiting.format(names=", ".join(c.name for c in waiting if c.kind is k))
                for k in ConsentKind if any(c.kind is k for c in waiting)]
        text = "; ".join(said)
        return text[0].upper() + text[1:] + " (see the banner, or run: agent-desk consent list)."
