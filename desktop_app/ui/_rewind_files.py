"""The window's rewind: a timeline row's "Rewind files to before this call" plans the rewind off the event
loop, shows its diff in a dialog, and does it once the person confirms (recorded in the chain by the runtime).
A component the controller holds."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..core import AgentDeskError
from ..runtime import plan_rewind, run_rewind
from . import dialogs

if TYPE_CHECKING:
    from ..runtime import Desk, Rewind
    from ._mainwindow import MainWindow

PERSON = "person:window"


class RewindFiles:
    """Answers the timeline's rewindRequested; `dialog` is the last dialog shown (for the tests)."""

    def __init__(self, window: MainWindow, desk: Desk, spawn: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self.window = window
        self.desk = desk
        self.dialog: dialogs.RewindDialog | None = None
        window.timeline.rewindRequested.connect(lambda call_id: spawn(self.rewind(call_id)))

    async def rewind(self, call_id: str) -> bool:
        """Plan, show, confirm and do; True when files were rewound. A refusal is an AgentDeskError (shown)."""
        await self.desk.store.flush()
        record = await self.desk.store.get_record(call_id)
        if record is None:
            raise AgentDeskError(f"The call {call_id} is not in the audit log.")
        rewind: Rewind = await plan_rewind(self.desk.store, self.desk.settings, record.session_id, call_id)
        self.dialog = dialogs.RewindDialog(rewind.plan, self.window)
        try:
            answer = await self.dialog.ask()
        finally:
            self.dialog.deleteLater()
        if not answer or rewind.plan.empty:
            return False
        await run_rewind(self.desk.store, self.desk.bus, rewind, actor=PERSON, include_mine=answer["include_mine"])
        done = rewind.done
        assert done is not None
        note = (f"↶ Files rewound to before {call_id}: {len(done.restored)} restored, {len(done.removed)} removed"
                + (f", {len(done.kept)} of yours kept" if done.kept else "")
                + (f"; {len(done.failed)} could not be: {'; '.join(done.failed.values())}" if done.failed else ""))
        self.window.conversation.add_notice(note, "#d9363e" if done.failed else "#2f9e44")
        return not done.failed
