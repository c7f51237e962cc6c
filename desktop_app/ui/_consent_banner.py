"""The window's side of consent: when a session of a project whose rules file is untrusted is shown, a banner
says so and offers the review (the consent dialog, with the diff) with "Trust these rules" / "Ignore them"."""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..core import AgentDeskError, ProjectInfo
from ..runtime import Consent, project_rules_trust, trust_project_rules
from . import dialogs

log = logging.getLogger(__name__)
BANNER_KEY = "rules-trust"


class ConsentBanner:
    """Checks a project's rules (off the GUI thread) and shows the banner; `reload` hands trusted rules to
    the project's open runtime (a coroutine function of the project, or None)."""

    def __init__(self, window: Any, spawn: Callable[[Awaitable[Any]], Any],
                 reload: Callable[[ProjectInfo], Awaitable[Any]] | None = None) -> None:
        self.window = window
        self.spawn = spawn
        self.reload = reload
        self.untrusted: dict[str, Consent] = {}  # project id -> what was read
        self.ignored: set[str] = set()  # project ids whose banner was dismissed in this run
        self.dialog: dialogs.ConsentDialog | None = None

    async def check(self, project: ProjectInfo) -> Consent | None:
        """Read the project's rules against the trust record and show (or clear) the banner."""
        try:
            trust = await asyncio.to_thread(project_rules_trust, project.path)
        except AgentDeskError as e:  # e.g. a link planted at the rules file: refused, and said so
            self.window.banner.set_item(BANNER_KEY, f"⚠ {html.escape(e.user_message())}")
            return None
        if trust.ok:
            self.untrusted.pop(project.id, None)
            self.window.banner.clear_item(BANNER_KEY)
            return trust
        self.untrusted[project.id] = trust
        if project.id in self.ignored:
            self.window.banner.clear_item(BANNER_KEY)
            return trust
        what = {"new": "were never trusted", "changed": "changed since you trusted them",
                "deleted": "were deleted since you trusted them"}.get(trust.status, "are not trusted")
        self.window.banner.set_item(
            BANNER_KEY,
            f"⚠ The rules of <b>{html.escape(project.name)}</b> (<code>.agent-desk/rules.toml</code>) {what}. "
            "Until you trust them, its sessions use your own rules only.",
            [("Review…", lambda: self.spawn(self.review(project))),
             ("Ignore them", lambda: self.ignore(project))])
        return trust

    def ignore(self, project: ProjectInfo) -> None:
        self.ignored.add(project.id)
        self.window.banner.clear_item(BANNER_KEY)

    async def review(self, project: ProjectInfo) -> bool:
        """Show the diff; on "Trust these rules", trust exactly the text shown and reload the runtime."""
        trust = self.untrusted.get(project.id) or await self.check(project)
        if trust is None or trust.ok:
            return False
        self.dialog = dialogs.ConsentDialog(trust, project.name, parent=self.window)
        try:
            answer = await self.dialog.ask()
        finally:
            self.dialog.deleteLater()
            self.dialog = None
        if answer is None:
            self.ignore(project)
            return False
        await asyncio.to_thread(trust_project_rules, trust)
        if self.reload is not None:
            await self.reload(project)
        self.window.conversation.add_notice(f"The rules of {project.name} are trusted and in use.")
        await self.check(project)  # a file changed while it was reviewed is asked about again
        return True

    def notice_for(self, project: ProjectInfo) -> str | None:
        """What a session opening now should say about its project's rules, if anything."""
        trust = self.untrusted.get(project.id)
        if trust is None:
            return None
        return ("This session uses your own rules only: the project's rules are not trusted "
                "(see the banner, or run: agent-desk rules trust).")
