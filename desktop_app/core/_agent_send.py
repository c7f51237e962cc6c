"""What the person sends to a session: the message's images checked against the API's limits with the
session's earlier ones, and the messages that arrive while a turn runs, queued for its next step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ._errors import AgentDeskError
from ._messages import StoredMessage
from ._prompt_images import PromptImage, check_prompt_images, history_image_sizes, image_block

T = TypeVar("T")


class Outbox:
    """The texts sent during a turn (they join its next step's user message) and the image blocks of the
    message(s) not yet appended, in order: each message's worth goes before its text."""

    __slots__ = ("images", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.images: list[dict[str, Any]] = []

    def __bool__(self) -> bool:
        return bool(self.texts)

    async def send(self, text: str, images: Sequence[PromptImage], session_id: str,
                   history: list[StoredMessage] | None, load: Callable[[], Awaitable[list[StoredMessage]]],
                   running: Callable[[], asyncio.Future[T] | None], start: Callable[[str], Awaitable[T]]) -> T:
        """`AgentSession.send`: a turn of its own (`start`), or queued for the `running` turn's next step. The
        images are checked with the session's `history` (`load`ed when it is not known yet)."""
        if not text.strip() and not images:
            raise AgentDeskError("The message is empty.")
        blocks = await self.image_blocks(images, (history if history is not None else await load()) if images else [],
                                         session_id)
        if (turn := running()) is not None:  # asked after the check: the turn may have ended meanwhile
            self.queue(text, blocks)
            return await asyncio.shield(turn)
        self.images = blocks
        return await start(text)

    async def image_blocks(self, images: Sequence[PromptImage], history: list[StoredMessage],
                           session_id: str) -> list[dict[str, Any]]:
        """`images` as message blocks, checked with the session's `history` and the images still queued."""
        if images:
            queued = StoredMessage(session_id, "user", self.images)
            check_prompt_images(images, await asyncio.to_thread(history_image_sizes, [*history, queued]))
        return [image_block(i) for i in images]

    def queue(self, text: str, blocks: list[dict[str, Any]]) -> None:
        """A message sent while a turn runs."""
        self.texts.append(text)
        self.images += blocks

    def drain(self) -> list[str]:
        """The texts queued so far (the queue is left empty)."""
        queued, self.texts = self.texts, []
        return queued

    def take_images(self) -> list[dict[str, Any]]:
        """The image blocks of the messages being sent (each a message's worth, in order)."""
        taken, self.images = self.images, []
        return taken
