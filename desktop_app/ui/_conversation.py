"""The conversation: Markdown with highlighted code, streamed text appended once per frame, and
compact tool-call cards that link to their timeline row."""

from __future__ import annotations

import html
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QPoint, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QContextMenuEvent,
    QFont,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFrameFormat,
    QTextLength,
    QTextTableFormat,
)
from PySide6.QtWidgets import QDialog, QMenu, QTextBrowser

from ..core import (
    Compacted,
    Done,
    Envelope,
    ErrorEvent,
    PromptImage,
    SessionNotice,
    StateChanged,
    TokenUsage,
    ToolCallRecord,
    ToolCallState,
    ToolEnd,
    ToolStart,
    compaction_facts,
    image_of_block,
    is_summary,
    starts_a_turn,
    summarize_input,
)
from ._bridge import EventBridge
from ._prompt_images import show_full_size, thumbnail
from ._theme import format_duration, is_dark
from ._tool_card import ToolCard, card_html, card_truth, input_summary

_FENCE = re.compile(r"^```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^```[ \t]*$|\Z)", re.S | re.M)
FRAME_MS = 16  # streamed chunks are coalesced and painted at most once per frame
CONVERSATION_THUMB = 160  # px, the longer side of a prompt image in the conversation
SHOWN_CARDS = 300  # a reopened session renders its last calls (10,000 cards take seconds); a link shows more


# The key of a card whose input still streams; a prefix no desk id (`call_…`) has.
STREAMING_KEY = "streaming:"
# What the conversation shows again from the store when a session is reopened (beside its messages).
NOTICE_EVENTS = (ErrorEvent.type, Done.type, SessionNotice.type, TokenUsage.type)
_NOTICE_COLOURS = {"error": "#d9363e", "warning": "#d4890b", "info": "#8a8f98"}


def turn_cost_text(tokens_in: float, tokens_out: float, cost_usd: float) -> str:
    """The line that ends a turn in the conversation: its tokens and its cost."""
    return f"This turn: {int(tokens_in):,} tokens in · {int(tokens_out):,} out · ${cost_usd:.4f}"


def split_fences(text: str) -> list[tuple[str, str | None]]:
    """Split Markdown into (text, None) prose parts and (code, language) fenced blocks."""
    parts: list[tuple[str, str | None]] = []
    pos = 0
    for m in _FENCE.finditer(text):
        if m.start() > pos:
            parts.append((text[pos : m.start()], None))
        parts.append((m.group(2).rstrip("\n"), m.group(1) or ""))
        pos = m.end()
    if pos < len(text):
        parts.append((text[pos:], None))
    return parts


def highlight_html(code: str, language: str, dark: bool) -> str:
    """Pygments -> inline-styled spans (QTextDocument has no CSS classes)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    fmt = HtmlFormatter(noclasses=True, nowrap=True, style="monokai" if dark else "friendly")
    return highlight(code, lexer, fmt)


class ConversationView(QTextBrowser):
    """Append-only view of one session's conversation."""

    callActivated = Signal(str)  # a tool card was clicked: select its timeline row
    retryRequested = Signal()  # the Retry of the error line
    turnRewindRequested = Signal(int)  # a prompt's "Rewind to before this turn" (the session's n-th prompt, from 0)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._anchor_clicked)
        self.setPlaceholderText("Ask something below to start.")
        self.document().setDocumentMargin(12)
        self._pending: list[str] = []
        self._stream_msg: str | None = None
        self._stream_start: int | None = None
        self._stream_text: list[str] = []
        self._cards: dict[str, ToolCard] = {}
        self._dirty: set[str] = set()  # cards whose streamed output grew since the last frame
        self._frame = QTimer(self, singleShot=True, interval=FRAME_MS)
        self._frame.timeout.connect(self.flush)
        self._card_frame = QTimer(self, singleShot=True, interval=FRAME_MS)
        self._card_frame.timeout.connect(self._repaint_dirty)
        self.chunks_painted = 0  # frames painted (for tests and benchmarks)
        self._current_session: Callable[[], str | None] = lambda: None
        self._turn_usage: dict[str, list[float]] = {}  # session -> [in, out, cost] of the turn under way
        self._last_error: str | None = None  # the turn's error line, so its Done does not print it again
        self._shown_cards = SHOWN_CARDS  # a reopened session shows its last calls; earlier ones on request
        self._loaded: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
        self._bulk = False  # a session is being loaded: scroll once at the end, not per card
        self._bulk_dark = False  # the theme while it loads, asked once for all its cards
        self._retry_span: tuple[int, int] | None = None  # where the Retry link is, to take it away
        self._turns: list[tuple[QTextCursor, int]] = []  # each prompt shown (its span follows edits) and its number
        self._turn_count = 0  # the session's prompts so far (shown or behind the "earlier" link)
        self._images: dict[str, PromptImage] = {}  # the prompts' images shown, by digest (a click shows one whole)
        self._viewer: QDialog | None = None

    # the bridge ------------------------------------------------------------------------------
    def attach(self, bridge: EventBridge, current_session: Callable[[], str | None]) -> None:
        """Follow the current session: its streamed text, its tool cards, how its turns end."""
        self._current_session = current_session
        bridge.textChunk.connect(self._on_text)
        bridge.toolStarted.connect(self._on_tool_start)
        bridge.stateChanged.connect(self._on_state)
        bridge.toolEnded.connect(self._on_end)
        bridge.turnDone.connect(self._on_done)
        bridge.errorOccurred.connect(self._on_error)
        bridge.envelope.connect(self._on_envelope)
        bridge.tokenUsage.connect(self._on_usage)
        bridge.sessionNotice.connect(self._on_notice)

    def attach_records(self, output_appended: Any, record_loaded: Any) -> None:
        """Stream each call's output under its card, and give the card its full record when it is loaded."""
        output_appended.connect(self.append_output)
        record_loaded.connect(self.set_record)

    def append_output(self, call_id: str, text: str) -> None:
        card = self._cards.get(call_id)
        if card is None or sum(map(len, card.output)) > 200_000:
            return
        card.output.append(text)
        self._dirty.add(call_id)
        if not self._card_frame.isActive():
            self._card_frame.start()

    def _repaint_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for call_id in dirty:
            if call_id in self._cards:
                self._paint_card(call_id)

    def set_record(self, rec: ToolCallRecord) -> None:
        """The call's full record: its exit code, its result, why it was refused."""
        card = self._cards.get(rec.id)
        if card is None:
            return
        card.take(rec)
        self._paint_card(rec.id)

    def scroll_to_card(self, call_id: str) -> bool:
        """Scroll so the call's card is at the top of the view; False when the conversation shows no such card."""
        card = self._cards.get(call_id)
        if card is None:
            return False
        bar = self.verticalScrollBar()
        bar.setValue(bar.value() + self.cursorRect(card.table.firstCursorPosition()).top() - 8)
        return True

    def card_text(self, call_id: str) -> str:
        """The text a card shows (for tests and the screen reader)."""
        card = self._cards[call_id]
        cell = card.table.cellAt(0, 0)
        cur = cell.firstCursorPosition()
        cur.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
        return cur.selectedText().replace("\u2029", "\n").replace("\u2028", "\n").replace("\xa0", " ")

    def _on_envelope(self, env: Any) -> None:
        # compaction has no signal of its own: the raw stream carries it
        if env.type == Compacted.type and env.session_id == self._current_session():
            p = env.payload
            self.add_compaction_notice(p.get("summarised", 0), bool(p.get("manual")), p.get("summary", ""))

    def _on_usage(self, ev: TokenUsage) -> None:
        u = self._turn_usage.setdefault(ev.session_id, [0, 0, 0.0])
        u[0] += ev.input_tokens + ev.cache_creation_input_tokens + ev.cache_read_input_tokens
        u[1] += ev.output_tokens
        u[2] += ev.cost_usd

    def _on_text(self, session_id: str, message_id: str, text: str) -> None:
        if session_id == self._current_session():
            self.append_chunk(message_id, text)

    def _on_tool_start(self, ev: ToolStart) -> None:
        if ev.session_id != self._current_session():
            return
        streaming = STREAMING_KEY + ev.tool_use_id
        if ev.partial:
            # No record yet: the card is keyed by the model's id until the record's own event names it.
            if not self.has_card(streaming):
                self.add_tool_card(streaming, ev.name, ev.input)
            return
        if ev.tool_use_id and self.has_card(streaming) and not self.has_card(ev.call_id):
            self._cards[ev.call_id] = self._cards.pop(streaming)
        self.add_tool_card(ev.call_id, ev.name, ev.input)

    def _on_state(self, ev: StateChanged) -> None:
        if ev.session_id == self._current_session():
            self.update_tool_card(ev.call_id, ev.state)

    def _on_end(self, ev: ToolEnd) -> None:
        if ev.session_id == self._current_session():
            card = self._cards.get(ev.call_id)
            if card is not None:
                card.exit_code = getattr(ev, "exit_code", None)
            self.update_tool_card(ev.call_id, ev.state or "COMPLETED", ev.duration_ms)

    def _on_done(self, ev: Done) -> None:
        usage = self._turn_usage.pop(ev.session_id, None)
        if ev.session_id == self._current_session():
            self.show_done(ev, usage)

    def _on_error(self, ev: ErrorEvent) -> None:
        # a retry is shown in the status bar; the notice is for errors that end the attempt
        if not ev.retrying and (not ev.session_id or ev.session_id == self._current_session()):
            self.show_error(ev.message)

    def _on_notice(self, ev: SessionNotice) -> None:
        if ev.session_id == self._current_session():
            self.add_notice(f"⚠ {ev.text}" if ev.level != "info" else ev.text,
                            _NOTICE_COLOURS.get(ev.level, "#8a8f98"))

    def show_done(self, ev: Done, usage: list[float] | None = None) -> None:
        """How a turn ended, when that is news: its tokens and cost, one line, and one error line only (with
        its Retry)."""
        self.finish_message()
        if usage is not None:  # each turn's tokens and cost, where the turn ends
            self.add_notice(turn_cost_text(*usage))
        if ev.reason == "interrupted":
            self.add_notice("Interrupted.")
        elif ev.reason == "error" and ev.message:
            if self._last_error is None or ev.message not in self._last_error:
                self.show_error(ev.message)
            self.offer_retry()
        elif ev.reason in ("max_steps", "paused") and ev.message:
            self.add_notice(f"{ev.reason}: {ev.message}", "#d4890b")

    def show_error(self, message: str) -> None:
        """The one error line of a turn; the Done that follows it adds the Retry, not a second line."""
        if self._last_error == message:
            return
        self.add_notice(f"⚠ {message}", "#d9363e")
        self._last_error = message

    def offer_retry(self) -> None:
        """A Retry link at the end of the conversation (the last error line): it runs the step again."""
        self.take_retry()
        cur = self._end_cursor()
        start = cur.position()
        cur.insertHtml("&nbsp;&nbsp;<a href='retry:' style='font-weight:bold'>↻ Retry</a>")
        self._retry_span = (start, self._end_cursor().position())

    def take_retry(self) -> None:
        """The Retry link goes (a retry started, or a new message was sent)."""
        span, self._retry_span = self._retry_span, None
        if span is None or span[1] > self.document().characterCount():
            return
        cur = QTextCursor(self.document())
        cur.setPosition(span[0])
        cur.setPosition(span[1], QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()

    def has_retry(self) -> bool:
        return self._retry_span is not None

    # streaming -------------------------------------------------------------------------------
    def append_chunk(self, message_id: str, text: str) -> None:
        if message_id != self._stream_msg:
            self.finish_message()
            self._stream_msg = message_id
        self._pending.append(text)
        if not self._frame.isActive():
            self._frame.start()

    def flush(self) -> None:
        """Paint the chunks that arrived since the last frame, as plain text, at the end."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        stick = self._at_bottom()
        cur = self._end_cursor()
        if self._stream_start is None:
            self._header(cur, "Assistant")
            cur = self._end_cursor()
            self._stream_start = cur.position()
        cur.insertText(text, QTextCharFormat())
        self._stream_text.append(text)
        self.chunks_painted += 1
        if stick:
            self._scroll_to_end()

    def finish_message(self) -> None:
        """The streamed message is complete: re-render it as Markdown with highlighted code."""
        self._frame.stop()
        self.flush()
        if self._stream_start is None:
            self._stream_msg = None
            return
        text = "".join(self._stream_text)
        cur = self._end_cursor()
        cur.setPosition(self._stream_start, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        self._insert_markdown(text)
        self._stream_start = None
        self._stream_text = []
        self._stream_msg = None

    # whole messages --------------------------------------------------------------------------
    def add_user_message(self, text: str, images: Sequence[PromptImage] = (), *, turn: bool = True) -> None:
        """A prompt of the person's (with its images); `turn`: it starts a turn (not a second text of the
        same message)."""
        self.take_retry()
        self._last_error = None
        self.finish_message()
        cur = self._end_cursor()
        start = cur.position()
        self._header(cur, "You")
        if images:
            self._insert_images(images)
        self._insert_markdown(text)
        if turn:
            span = QTextCursor(self.document())
            span.setPosition(start)
            span.setPosition(self._end_cursor().position(), QTextCursor.MoveMode.KeepAnchor)
            span.setKeepPositionOnInsert(True)  # what comes after the prompt does not join its span
            self._turns.append((span, self._turn_count))
            self._turn_count += 1
        self._scroll_to_end()

    def turn_at(self, position: int) -> int | None:
        """The number of the prompt shown at document `position` (0 the session's first), if one is."""
        return next((n for span, n in self._turns if span.selectionStart() <= position < span.selectionEnd()), None)

    def menu_at(self, point: QPoint) -> QMenu:
        """The context menu at `point` (viewport coordinates): copy and select, and on a prompt of the
        person's, "Rewind to before this turn…"."""
        menu = self.createStandardContextMenu()
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        turn = self.turn_at(self.cursorForPosition(point).position())
        if turn is not None:
            menu.addSeparator()
            menu.addAction("Rewind to before this turn…", lambda: self.turnRewindRequested.emit(turn))
        return menu

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        self.menu_at(event.pos()).popup(event.globalPos())

    def _insert_images(self, images: Sequence[PromptImage]) -> None:
        """Thumbnails of a prompt's images, each a link that shows it whole (kept by digest for that)."""
        cur = self._end_cursor()
        self._new_block(cur)
        for img in images:
            self._images[img.sha256] = img
            url = QUrl(f"prompt-image:{img.sha256}")
            pix = thumbnail(img.data, CONVERSATION_THUMB)
            self.document().addResource(QTextDocument.ResourceType.ImageResource, url, pix.toImage())
            tip = html.escape(f"{img.width}×{img.height} px {img.media_type}, sha256 {img.sha256[:12]}…")
            cur.insertHtml(f"<a href='image:{img.sha256}' title='{tip}'><img src='{url.toString()}' "
                           f"width='{pix.width()}' height='{pix.height()}'></a>&nbsp;")

    def image_digests(self) -> list[str]:
        """The digests of the images shown (in the order first shown): for tests and the accessibility tree."""
        return list(self._images)

    def add_assistant_markdown(self, text: str) -> None:
        self.finish_message()
        self._header(self._end_cursor(), "Assistant")
        self._insert_markdown(text)

    def add_compaction_notice(self, summarised: int, manual: bool, summary: str) -> None:
        """The conversation was compacted: what the model now starts from; the originals stay above."""
        how = "by hand" if manual else "near the context limit"
        self.add_notice(f"⤓ Conversation compacted {how}: {summarised} earlier message"
                        f"{'' if summarised == 1 else 's'} summarised. The model continues from the summary "
                        "below; the audit keeps every original message.", "#3b82c4")
        if summary:
            self.add_notice(summary)

    def add_notice(self, text: str, colour: str = "#8a8f98") -> None:
        self.finish_message()
        cur = self._end_cursor()
        self._new_block(cur)
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(colour))
        fmt.setFontItalic(True)
        cur.insertText(text, fmt)
        self._scroll_to_end()

    def add_tool_card(self, call_id: str, name: str, data: dict[str, Any] | None, state: str = "PENDING",
                      duration_ms: float | None = None, record: ToolCallRecord | None = None) -> None:
        """A compact card; clicking it selects the call's timeline row. With its `record` (a stored session
        loading) the card is drawn once, whole."""
        if call_id in self._cards:
            self.update_tool_card(call_id, state, summary=summarize_input(data, 90) if data else None)
            if record is not None:
                self.set_record(record)
            return
        self.finish_message()
        cur = self._end_cursor()
        self._new_block(cur)
        fmt = QTextTableFormat()
        fmt.setBorder(1)
        fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        fmt.setBorderBrush(QColor("#8a8f98"))
        fmt.setCellPadding(4)
        fmt.setCellSpacing(0)
        fmt.setMargin(2)
        fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
        table = cur.insertTable(1, 1, fmt)
        card = self._cards[call_id] = ToolCard(table, name, input_summary(data), format_duration(duration_ms), state)
        if record is not None:
            card.take(record)
        self._paint_card(call_id)
        self._scroll_to_end()

    def update_tool_card(self, call_id: str, state: str, duration_ms: float | None = None,
                         summary: str | None = None) -> None:
        card = self._cards.get(call_id)
        if card is None:
            return
        card.summary = summary or card.summary
        card.duration = format_duration(duration_ms) or card.duration
        card.state = state
        self._paint_card(call_id)

    def has_card(self, call_id: str) -> bool:
        return call_id in self._cards

    def clear_conversation(self) -> None:
        self._frame.stop()
        self._pending.clear()
        self._stream_msg = self._stream_start = None
        self._stream_text = []
        self._cards.clear()
        self._dirty.clear()
        self._last_error = None
        self._retry_span = None
        self._turns, self._turn_count = [], 0
        self._images.clear()
        self.clear()

    def load_messages(self, messages: list[Any], records: list[ToolCallRecord] | None = None,
                      notices: list[Envelope] | None = None) -> None:
        """Rebuild from stored Messages-API messages (user text, assistant text and tool_use blocks).

        `records` (oldest first) give each tool_use card its record: the model may repeat a tool_use id,
        so each block takes the next record that carries its id, and the card is keyed by the record's id.
        `notices` (stored ErrorEvent, Done and SessionNotice envelopes, oldest first) go back between the
        messages where they happened; a last error line gets its Retry back.
        """
        self._loaded = (messages, records or [], notices or [])
        self._shown_cards = SHOWN_CARDS
        self._render_loaded()

    def _render_loaded(self) -> None:
        messages, records, notices = self._loaded
        self.clear_conversation()
        self._replayed_usage: list[float] = [0, 0, 0.0]
        by_use: dict[str, deque[ToolCallRecord]] = {}
        for r in records or []:
            by_use.setdefault(r.tool_use_id or r.id, deque()).append(r)
        first = self._first_shown(messages)
        self._turn_count = sum(1 for m in messages[:first] if starts_a_turn(m))
        for msg in messages[:first]:  # not shown: their records are passed over, so the cards pair up
            for block in msg.content:
                if block.get("type") == "tool_use" and by_use.get(block.get("id", "")):
                    by_use[block["id"]].popleft()
        later = deque(n for n in notices or () if not first or n.time >= messages[first].created_at)
        batch = QTextCursor(self.document())
        batch.beginEditBlock()  # one layout for the lot, not one per card
        self._bulk, self._bulk_dark = True, is_dark()
        try:
            if first:
                self._earlier_link(messages[:first])
            for msg in messages[first:]:
                while later and later[0].time < msg.created_at:
                    self._replay(later.popleft())
                if starts_a_turn(msg):  # a turn cut short (no Done: the app died) does not add to the next
                    self._replayed_usage = [0, 0, 0.0]
                self._add_blocks(msg, by_use)
            while later:
                self._replay(later.popleft())
        finally:
            self._bulk = False
            batch.endEditBlock()
        self._scroll_to_end()

    def _first_shown(self, messages: list[Any]) -> int:
        """Where the shown tail starts: the last `_shown_cards` tool calls (and their messages), from a
        message of the person's when there is one near; earlier ones wait behind a link."""
        cards = 0
        for i in range(len(messages) - 1, -1, -1):
            cards += sum(1 for b in messages[i].content if b.get("type") == "tool_use")
            if cards > self._shown_cards:
                return i + 1
        return 0

    def _earlier_link(self, hidden: list[Any]) -> None:
        calls = sum(1 for m in hidden for b in m.content if b.get("type") == "tool_use")
        cur = self._end_cursor()
        cur.insertHtml(f"<a href='earlier:'>⤒ Show {len(hidden):,} earlier messages ({calls:,} tool calls)</a>")

    def show_earlier(self) -> None:
        """The link above the tail: four times as much, re-rendered from what was loaded (no store read)."""
        self._shown_cards *= 4
        self._render_loaded()
        self.verticalScrollBar().setValue(0)

    def _replay(self, env: Envelope) -> None:
        ev = env.event
        if isinstance(ev, SessionNotice):
            self._on_notice(ev)
        elif isinstance(ev, ErrorEvent):
            if not ev.retrying:
                self.show_error(ev.message)
        elif isinstance(ev, TokenUsage):  # summed apart from a live turn's, and shown at its turn's end
            u = self._replayed_usage
            u[0] += ev.input_tokens + ev.cache_creation_input_tokens + ev.cache_read_input_tokens
            u[1] += ev.output_tokens
            u[2] += ev.cost_usd
        elif isinstance(ev, Done):
            usage, self._replayed_usage = self._replayed_usage, [0, 0, 0.0]
            self.show_done(ev, usage if any(usage) else None)

    def _add_blocks(self, msg: Any, by_use: dict[str, deque[ToolCallRecord]]) -> None:
        if is_summary(msg):  # a compaction: a notice, not a message the person wrote
            facts = compaction_facts(msg)
            self.add_compaction_notice(facts.get("summarised", 0), bool(facts.get("manual")),
                                       msg.content[0].get("text", ""))
            return
        images = [img for b in msg.content if (img := image_of_block(b)) is not None] if msg.role == "user" else []
        if images and not any(b.get("type") == "text" and b.get("text") for b in msg.content):
            self.add_user_message("", images, turn=starts_a_turn(msg))  # a prompt of images only
        for block in msg.content:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                if msg.role == "user":
                    turn = starts_a_turn(msg) and block is next(b for b in msg.content if b.get("type") == "text"
                                                                 and b.get("text"))
                    self.add_user_message(block["text"], images, turn=turn)
                    images = []
                else:
                    self.add_assistant_markdown(block["text"])
            elif kind == "tool_use":
                queue = by_use.get(block.get("id", ""))
                rec = queue.popleft() if queue else None
                cid = rec.id if rec else block.get("id", "")
                self.add_tool_card(cid, block.get("name", ""), block.get("input") or {},
                                   rec.state.value if rec else "COMPLETED", rec.duration_ms if rec else None,
                                   record=rec)

    # internals -------------------------------------------------------------------------------
    def _paint_card(self, call_id: str) -> None:
        card = self._cards[call_id]
        state = card.state if card.state in {s.value for s in ToolCallState} else "PENDING"
        truth = card_truth(card.name, state, card.record, "".join(card.output), card.exit_code)
        cell = card.table.cellAt(0, 0)
        cur = cell.firstCursorPosition()
        cur.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
        stick = self._at_bottom()
        cur.insertHtml(card_html(call_id, card.name, card.summary, truth, card.duration, full=card.full,
                                 dark=self._dark()))
        if stick:
            self._scroll_to_end()

    def _insert_markdown(self, text: str) -> None:
        dark = self._dark()
        for part, lang in split_fences(text):
            cur = self._end_cursor()
            if lang is None:
                if part.strip():
                    self._new_block(cur)
                    cur.insertMarkdown(part.strip("\n"))
            else:
                self._new_block(cur)
                bg = "#272822" if dark else "#f4f5f7"
                fmt = QTextTableFormat()
                fmt.setBorder(0)
                fmt.setCellPadding(6)
                fmt.setCellSpacing(0)
                fmt.setBackground(QColor(bg))
                fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
                table = cur.insertTable(1, 1, fmt)
                cell_fmt = table.cellAt(0, 0).format()
                cell_fmt.setBackground(QColor(bg))
                table.cellAt(0, 0).setFormat(cell_fmt)
                cell = table.cellAt(0, 0).firstCursorPosition()
                body = highlight_html(part, lang, dark).rstrip("\n").replace("\n", "<br>")
                # keep indentation: QTextDocument collapses spaces outside <pre>
                body = re.sub(r"(?<=>)( +)|^( +)|(?<=<br>)( +)", lambda m: "&nbsp;" * len(m.group(0)), body)
                cell.insertHtml(f"<span style='font-family:monospace'>{body}</span>")

    def _header(self, cur: QTextCursor, who: str) -> None:
        self._new_block(cur, top_margin=10)
        fmt = QTextCharFormat()
        fmt.setFontWeight(QFont.Weight.Bold)
        fmt.setForeground(QColor("#3b82c4" if who == "You" else "#2f9e44"))
        cur.insertText(who, fmt)
        self._new_block(cur)

    def _dark(self) -> bool:
        return self._bulk_dark if self._bulk else is_dark()

    def _new_block(self, cur: QTextCursor, top_margin: float = 2) -> None:
        if cur.block().length() <= 1:  # the last block is empty: reuse it
            bf = cur.blockFormat()
            bf.setTopMargin(top_margin)
            cur.setBlockFormat(bf)
            return
        bf = QTextBlockFormat()
        bf.setTopMargin(top_margin)
        cur.insertBlock(bf, QTextCharFormat())

    def _end_cursor(self) -> QTextCursor:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        return cur

    def _at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 4

    def _scroll_to_end(self) -> None:
        if self._bulk:
            return
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == "earlier":
            self.show_earlier()
        elif url.scheme() == "image":
            img = self._images.get(url.path() or url.toString().removeprefix("image:"))
            if img is not None:
                self._viewer = show_full_size(self.window(), img.data, f"Image {img.sha256[:12]}…")
        elif url.scheme() == "retry":
            self.take_retry()
            self.retryRequested.emit()
        elif url.scheme() == "output":
            card = self._cards.get(url.path() or url.toString().removeprefix("output:"))
            if card is not None:
                card.full = not card.full
                self._paint_card(url.path() or url.toString().removeprefix("output:"))
        elif url.scheme() == "call":
            self.callActivated.emit(url.path() or url.toString().removeprefix("call:"))
        elif url.scheme() in ("http", "https"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)
