"""The history as sent (`sendable`), kept from step to step: the messages appended since the last step are
added to it, rather than the whole history normalised again for every request."""

from __future__ import annotations

from typing import Any

from ._compaction import is_summary, sent_view
from ._messages import StoredMessage, normalize


class SendableHistory:
    """`of(history)` equals `sendable(history)`. While `history` is the same list, only grown, with no summary
    among the new messages, the last message as sent is rebuilt from the stored messages merged into it, and
    the new ones are added; anything else (another list, a cut, a compaction) builds it whole again."""

    __slots__ = ("_first", "_last", "_n", "_out", "_source", "_view")

    def __init__(self) -> None:
        self._source: list[StoredMessage] | None = None
        self._n = 0  # stored messages taken in
        self._first: StoredMessage | None = None  # the first and last of them, to see a list changed in place
        self._last: StoredMessage | None = None
        self._view: list[StoredMessage] = []  # the stored messages as sent (the summary's marker removed)
        self._out: list[dict[str, Any]] = []

    def of(self, history: list[StoredMessage]) -> list[dict[str, Any]]:
        n = len(history)
        new = history[self._n:]
        if (history is not self._source or n < self._n or not self._n or history[0] is not self._first
                or history[self._n - 1] is not self._last or any(is_summary(m) for m in new)):
            return self._whole(history)
        if new:
            start = _run_start(self._view, self._out[-1]["role"]) if self._out else 0
            self._view.extend(new)
            self._out[len(self._out) - 1 if self._out else 0:] = normalize(self._view[start:])
            self._n, self._last = n, history[-1]
        return list(self._out)

    def _whole(self, history: list[StoredMessage]) -> list[dict[str, Any]]:
        # After a summary the view is that summary and the turns it kept; the messages appended later (not
        # summaries) join its end, so the view grows as the history does.
        self._view = sent_view(history)
        self._out = normalize(self._view)
        self._source, self._n = history, len(history)
        self._first, self._last = (history[0], history[-1]) if history else (None, None)
        return list(self._out)


def _run_start(view: list[StoredMessage], role: str) -> int:
    """Where the stored messages merged into the last message as sent begin (empty ones are skipped)."""
    i = len(view)
    while i > 0 and (view[i - 1].role == role or not _content(view[i - 1])):
        i -= 1
    return i


def _content(message: StoredMessage) -> Any:
    return message.content if isinstance(message.content, list) else [message.content]
