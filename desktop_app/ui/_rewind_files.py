"""The window's rewind: a timeline row's "Rewind files to before this call" and a conversation turn's "Rewind
to before this turn" plan the rewind off the event loop, show its diff in a dialog (files only, or files and
conversation), and do it once the person confirms (recorded in the chain by the runtime); a conversation
rewound goes on in a new session, opened in the window. A component the controller holds."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..core import AgentDeskError
from ..runtime import plan_rewind, plan_turn_rewind, run_rewind
from . import dialogs

if TYPE_CHECKING:
    from ..runtime import Desk, Rewind
    from ._mainwindow import MainWindow

PERSON = "person:window"


class RewindFiles:
    """Answers the timeline's rewindRequested and the conversation's turnRewindRequested; `dialog` is the last
    dialog shown (for the tests). `controller` opens the branch a conversation rewind makes."""

    def __init__(self, window: MainWindow, desk: Desk, spawn: Callable[[Coroutine[Any, Any, Any]], Any],
                 controller: Any = None) -> None:
        self.window = window
        self.desk = desk
        self.controller = controller
        self.dialog: dialogs.RewindDialog | None = None
        window.timeline.rewindRequested.connect(lambda call_id: spawn(self.rewind(call_id)))
        window.conversation.turnRewindRequested.connect(lambda turn: spawn(self.rewind_turn(turn)))

    async def rewind(self, call_id: str) -> bool:
        """Plan, show, confirm and do; True when files were rewound. A refusal is an AgentDeskError (shown)."""
        await self.desk.store.flush()
        record = await self.desk.store.get_record(call_id)
        if record is None:
            raise AgentDeskError(f"The call {call_id} is not in the audit log.")
        rewind: Rewind = await plan_rewind(self.desk.store, self.desk.settings, record.session_id, call_id)
        return await self._ask_and_do(rewind, f"to before {call_id}", conversation=False,
                                      title="Rewind files to before this call")

    async def rewind_turn(self, turn: int) -> bool:
        """The current session, to before its `turn`-th prompt: the conversation, and its files (when a call
        from that turn on may have changed one)."""
        session_id = self.controller.current_session if self.controller is not None else None
        if not session_id:
            raise AgentDeskError("No session is open: there is no turn to rewind to.")
        await self.desk.store.flush()
        rewind: Rewind = await plan_turn_rewind(self.desk.store, self.desk.settings, session_id, turn)
        return await self._ask_and_do(rewind, "to before that turn", conversation=True,
                                      title="Rewind to before this turn")

    async def _ask_and_do(self, rewind: Rewind, where: str, *, conversation: bool, title: str) -> bool:
        self.dialog = dialogs.RewindDialog(rewind.plan, self.window, point=rewind.point, title=title,
                                           no_conversation=rewind.no_conversation, conversation=conversation)
        try:
            answer = await self.dialog.ask()
        finally:
            self.dialog.deleteLater()
        if not answer or (rewind.plan.empty and not answer["conversation"]):
            return False
        await run_rewind(self.desk.store, self.desk.bus, rewind, actor=PERSON, include_mine=answer["include_mine"],
                         conversation=answer["conversation"])
        done = rewind.done
        if done is not None:
            note = (f"↶ Files rewound {where}: {len(done.restored)} restored, {len(done.removed)} removed"
                    + (f", {len(done.kept)} of yours kept" if done.kept else "")
                    + (f"; {len(done.failed)} could not be: {'; '.join(done.failed.values())}" if done.failed else ""))
            self.window.conversation.add_notice(note, "#d9363e" if done.failed else "#2f9e44")
        if rewind.branch is not None:
            await self._open_branch(rewind)
        return done is None or not done.failed

    async def _open_branch(self, rewind: Rewind) -> None:
        """The branch opens in the window, the turn's prompt back in the prompt box (to ask again, or not)."""
        assert rewind.branch is not None and rewind.point is not None
        if self.controller is not None:
            await self.controller.reload_projects()
            await self.controller.select_session(rewind.branch.id)
        self.window.conversation.add_notice(
            f"↶ Conversation rewound: this session goes on from before “{rewind.point.prompt[:80]}” "
            f"(session {rewind.point.session.id} is kept as it was)", "#2f9e44")
        if not self.window.prompt.toPlainText().strip():
            self.window.prompt.setPlainText(rewind.point.prompt)
