"""A project's runtime as a test sees it: every event it published, an answerer for its approvals, a wait on
events (never a sleep), and the audit records of a session."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from desktop_app.core import Allow, ApprovalDecision


class Desk:
    """A runtime, every event it published, and an answerer for its approvals (Allow unless told otherwise;
    None leaves the call waiting)."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.events: list[Any] = []
        self.answer: Callable[[Any], ApprovalDecision | None] = lambda ev: Allow()
        self._seen = asyncio.Event()
        rt.bus.on("*", self._on)

    def _on(self, env: Any) -> None:
        self.events.append(env.event)
        self._seen.set()
        if env.type == "permission_required":
            decision = self.answer(env.event)
            if decision is not None:
                asyncio.get_running_loop().call_soon(self.rt.executor.decide, env.event.call_id, decision)

    def of(self, type_: str) -> list[Any]:
        return [e for e in self.events if getattr(e, "type", "") == type_]

    async def wait_for(self, pred: Callable[[Any], bool], within_s: float = 60) -> Any:
        async with asyncio.timeout(within_s):
            while True:
                hit = next((e for e in self.events if pred(e)), None)
                if hit is not None:
                    return hit
                self._seen.clear()
                await self._seen.wait()

    async def records(self, session_id: str) -> list[Any]:
        await self.rt.store.flush()
        return await self.rt.store.session_records(session_id)


def system_of(req: Any) -> str:
    """The system prompt of a request the fake Anthropic server received, as one text."""
    system = req.body.get("system")
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])
