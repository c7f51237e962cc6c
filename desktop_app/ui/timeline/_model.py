"""The timeline's table model: every tool call of the current session, fed by the bridge's tool events
(inserts batched to the next loop turn, so 100k rows stay smooth). A session's stored records are kept as
they come and become rows (summary, exit code, server) only when the view or a lookup needs one."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QColor

from ...core import (
    FileChanged,
    StateChanged,
    SubagentStarted,
    ToolCallRecord,
    ToolCallState,
    ToolCustom,
    ToolEnd,
    ToolError,
    ToolStart,
    ToolUpdate,
    mcp_tool_name,
    split_mcp_tool_name,
)
from .._bridge import EventBridge
from .._call_labels import call_headline, call_label
from .._mcp import McpCallName
from .._roles import Role
from .._rows import RowTableModel
from .._tasks import BackgroundTasks
from .._theme import format_duration, glyph_icon
from .._tool_card import shown_status

HOST_CHANGE = "file_changed"  # the Tool column of a row that is the host's change, not a call
_MCP_PREFIX = mcp_tool_name("s", "t").partition("s__")[0]  # "mcp__", as core names MCP tools
_MAX_OUTPUT = 200_000  # characters of streamed output kept per call in memory

# call id -> the full record from the store (None when it is not there)
RecordLoader = Callable[[str], Awaitable[ToolCallRecord | None]]
McpNames = Callable[[str, str], McpCallName | None]  # (tool name, project id) -> its server and own name


@dataclass(slots=True)
class TimelineRow:
    call_id: str
    name: str
    summary: str
    state: ToolCallState
    session_id: str = ""
    created_at: float = 0.0
    duration_ms: float | None = None
    exit_code: int | None = None
    outcome: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    record: ToolCallRecord | None = None  # the last full record seen, for the details pane
    server: str | None = None  # the MCP server of an MCP tool's call; None for a built-in tool
    parent_call_id: str = ""  # a sub-agent's call: the task_run call it is nested under
    depth: int = 0
    label: str = ""  # the tool's human label ("Run command"); empty for a host change

    @property
    def tool_text(self) -> str:
        return self.label or self.name

    @classmethod
    def from_record(cls, rec: ToolCallRecord) -> TimelineRow:
        return cls(
            call_id=rec.id,
            name=rec.name,
            summary=call_headline(rec.name, rec.input),
            state=rec.state,
            session_id=rec.session_id,
            created_at=rec.created_at,
            duration_ms=rec.duration_ms,
            exit_code=exit_code_of(rec),
            outcome=rec.outcome.value if rec.outcome else None,
            input=rec.input,
            record=rec,
            server=mcp_server_of(rec.name, rec),
            label=call_label(rec.name),
        )


def mcp_server_of(name: str, rec: ToolCallRecord | None = None) -> str | None:
    """The server an MCP call went to, as its record names it (else as its tool name does)."""
    return recorded_server(rec) or (split[0] if (split := split_mcp_tool_name(name)) else None)


def recorded_server(rec: ToolCallRecord | None) -> str | None:
    """The server in the result's details (`mcp_server`): its real name, which a tool name may have lost."""
    details = ((rec.result or {}).get("details") or {}) if rec is not None else {}
    server = details.get("mcp_server") if isinstance(details, dict) else None
    return server if isinstance(server, str) and server else None


def _may_have_server(rec: ToolCallRecord) -> bool:
    """Only an MCP tool's call goes to a server, and every MCP tool is named `mcp__server__tool`: a cheap
    test that spares the other records a row (the server itself comes from the row, as ever)."""
    return rec.name.startswith(_MCP_PREFIX)


def exit_code_of(rec: ToolCallRecord) -> int | None:
    details = (rec.result or {}).get("details") or {}
    code = details.get("exit_code")
    return code if isinstance(code, int) else None


class TimelineModel(RowTableModel):
    """Every tool call of a session, one row each, in the order they started."""

    COLUMNS = ("State", "Tool", "Input", "Duration", "Exit")
    outputAppended = Signal(str, str)  # call_id, text
    rowChanged = Signal(str)  # call_id
    recordLoaded = Signal(object)  # a call's full record, fetched after it ended (the conversation's card reads it)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        # A loaded record stays a ToolCallRecord until something reads its row (row_at): 100k records
        # load without building 100k rows, and only the rows on screen are ever built.
        self._rows: list[TimelineRow | ToolCallRecord] = []
        self._index: dict[str, int] = {}
        self._pending: list[TimelineRow] = []  # inserted at the next flush, in one beginInsertRows
        self._output: dict[str, list[str]] = {}
        self._flush = QTimer(self, singleShot=True, interval=0)
        self._flush.timeout.connect(self.flush)
        self._current_session: Callable[[], str | None] = lambda: None
        self._load_record: RecordLoader | None = None
        self._tasks = BackgroundTasks()
        # set by the app to what the window knows of the servers (their real names); alone, the name's parts
        self.mcp_names: McpNames | None = None
        self._servers: set[str] = set()  # the MCP servers of the calls shown
        self._host_changes = 0
        self._children: dict[str, str] = {}  # a shown sub-agent's session id -> the call that started it

    # Qt model API ------------------------------------------------------------------------------
    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        row = self.row_at(index.row())
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, col)
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            _word, colour, glyph = self.status_of(row)
            return glyph_icon(colour, glyph)
        if role == Qt.ItemDataRole.ForegroundRole and col == 0:
            return QColor(self.status_of(row)[1])
        if role == Qt.ItemDataRole.ToolTipRole:
            named = f"{row.label} ({row.name})" if row.label else row.name
            return f"{named}: {row.summary}\n{self.status_of(row)[0]}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (3, 4):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Role.CALL_ID:
            return row.call_id
        if role == Role.STATE:
            return row.state.value
        if role == Role.TOOL:
            return row.name
        return None

    @staticmethod
    def status_of(row: TimelineRow) -> tuple[str, str, str]:
        """(word, colour, glyph) of the State column: "exit 1" in red for a command that failed, a plan
        "approved" or "rejected" (as its card in the conversation says)."""
        return shown_status(row.name, row.state, row.outcome, row.record, row.exit_code)

    @classmethod
    def _display(cls, row: TimelineRow, col: int) -> str | None:
        if col == 0:
            return cls.status_of(row)[0]
        if col == 1:
            return f"{'  ' * (row.depth - 1)}⤷ {row.tool_text}" if row.depth else row.tool_text
        if col == 2:
            return row.summary
        if col == 3:
            return format_duration(row.duration_ms)
        if col == 4:
            return "" if row.exit_code is None else str(row.exit_code)
        return None

    # the bridge --------------------------------------------------------------------------------
    def attach(self, bridge: EventBridge, current_session: Callable[[], str | None],
               load_record: RecordLoader | None = None) -> None:
        """Follow the current session's tool events; `load_record` fetches a call's full record (exit
        code, result, trail, sandbox) when the call ends and when its details are asked for."""
        self._current_session = current_session
        self._load_record = load_record
        bridge.toolStarted.connect(self._on_start)
        bridge.stateChanged.connect(self._on_state)
        bridge.toolUpdated.connect(self._on_update)
        bridge.toolEnded.connect(self._on_end)
        bridge.toolErrored.connect(self._on_error)
        bridge.toolCustom.connect(self._on_custom)
        bridge.subagentStarted.connect(self._on_subagent)

    def attach_host_changes(self, bridge: EventBridge, current_session: Callable[[], str | None]) -> None:
        """Show the current session's `file_changed` (changes no tool made) as rows of their own."""
        bridge.fileChanged.connect(lambda ev: self.add_host_change(ev) if ev.session_id == current_session() else None)

    def add_host_change(self, ev: FileChanged) -> None:
        self._host_changes += 1
        paths = ", ".join(f"{k} {p}" for p, k in zip(ev.paths[:5], ev.kinds[:5], strict=False))
        more = f" and {len(ev.paths) - 5} more" if len(ev.paths) > 5 else ""
        self._pending.append(TimelineRow(f"host:{self._host_changes}", HOST_CHANGE, f"on the host: {paths}{more}",
                                         ToolCallState.COMPLETED, ev.session_id, time.time(),
                                         input={"paths": list(ev.paths), "kinds": list(ev.kinds)}))
        self._flush.start()

    def _shown(self, session_id: str) -> bool:
        """The current session's calls, and those of its sub-agents (nested under the calls that started them)."""
        return session_id == self._current_session() or session_id in self._children

    def link_child(self, child_session_id: str, parent_call_id: str) -> None:
        """Show `child_session_id`'s calls under the call `parent_call_id`."""
        self._children[child_session_id] = parent_call_id

    def _on_subagent(self, ev: SubagentStarted) -> None:
        if self._shown(ev.session_id):
            self.link_child(ev.child_session_id, ev.call_id)

    def _on_start(self, ev: ToolStart) -> None:
        # A row is a record: a tool_use still streaming has none yet (its card shows in the conversation).
        if self._shown(ev.session_id) and not ev.partial:
            self.upsert_started(ev.call_id, ev.name, ev.input, ev.session_id, time.time())

    def _on_state(self, ev: StateChanged) -> None:
        if self._shown(ev.session_id):
            self.set_state(ev.call_id, ev.state, ev.name, ev.session_id)

    def _on_update(self, ev: ToolUpdate) -> None:
        if self._shown(ev.session_id):
            self.append_output(ev.call_id, ev.text)

    def _on_end(self, ev: ToolEnd) -> None:
        if self._shown(ev.session_id):
            self.end(ev.call_id, ev.state, ev.outcome, ev.duration_ms)
            self.refresh(ev.call_id)

    def _on_custom(self, ev: ToolCustom) -> None:
        """A tool's own event (ctx.emit), as a line of its call's output."""
        if self._shown(ev.session_id):
            data = json.dumps(ev.data, ensure_ascii=False, default=str)
            self.append_output(ev.call_id, f"\n[{ev.name}] {data[:2000]}\n")

    def _on_error(self, ev: ToolError) -> None:
        if self._shown(ev.session_id):
            self.append_output(ev.call_id, f"\n[error] {ev.error}\n")

    def refresh(self, call_id: str) -> None:
        """Fetch the call's full record in the background (kept only if its session is still shown)."""
        if self._load_record is not None:
            self._tasks.spawn(self._refresh(call_id))

    async def _refresh(self, call_id: str) -> None:
        assert self._load_record is not None
        rec = await self._load_record(call_id)
        if rec is None or not self._shown(rec.session_id):
            return
        row = self._find(call_id)
        if row is not None and row.state.terminal and not rec.state.terminal:
            # The store lags behind the events: its write of the end failed (the call was stopped
            # unrecorded). The row keeps the end it was shown, not the stale state on disk.
            return
        self.update_record(rec)
        self.recordLoaded.emit(rec)

    # feeding -----------------------------------------------------------------------------------
    def add_records(self, records: Iterable[ToolCallRecord]) -> None:
        """Load many records at once (a session's history): one insert for the lot, each row built when it
        is first read; with sub-agents' calls among them, rows built now and nested under their parent calls."""
        records = list(records)
        if self._children and any(rec.session_id in self._children for rec in records):
            known = [rec for rec in records if rec.id in self._index]
            for rec in known:
                self.update_record(rec)
            self._insert([TimelineRow.from_record(rec) for rec in records if rec.id not in self._index])
            return
        index = self._index
        new: list[ToolCallRecord] = [] if index else list(records)  # an empty model: nothing to update
        for rec in records if index else ():
            if rec.id in index:
                self.update_record(rec)
            else:
                new.append(rec)  # its row is built when it is first read
        if not new:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(new) - 1)
        index.update(zip([rec.id for rec in new], range(first, first + len(new)), strict=True))
        self._rows.extend(new)
        for i in [i for i, rec in enumerate(new, first) if rec.name.startswith(_MCP_PREFIX)]:
            self._seen_server(self._materialize(i))
        self.endInsertRows()

    def _insert(self, rows: list[TimelineRow]) -> None:
        """Append `rows` in one insert; a sub-agent's call goes under its parent call instead, one by one
        (they are few), after the rows before it so that a parent in the same batch is there first."""
        plain: list[TimelineRow] = []
        for row in rows:
            parent = self._children.get(row.session_id)
            if parent is not None and (parent in self._index or parent in {p.call_id for p in plain}):
                self._append(plain)
                plain = []
                self._insert_at(self._subtree_end(parent), self._nest(row))
            else:
                plain.append(self._nest(row))
        self._append(plain)

    def _append(self, rows: list[TimelineRow]) -> None:
        if not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        for i, row in enumerate(rows, first):
            self._index[row.call_id] = i
            self._rows.append(row)
            self._seen_server(row)
        self.endInsertRows()

    def _materialize(self, i: int) -> TimelineRow:
        item = self._rows[i]
        if isinstance(item, TimelineRow):
            return item
        row = self._rows[i] = TimelineRow.from_record(item)
        self._name_server(row)
        return row

    def _nest(self, row: TimelineRow) -> TimelineRow:
        parent = self._children.get(row.session_id)
        if parent is not None:
            row.parent_call_id = parent
            i = self._index.get(parent)
            row.depth = (getattr(self._rows[i], "depth", 0) if i is not None else 0) + 1
        return row

    def _subtree_end(self, call_id: str) -> int:
        """The row after `call_id`'s last nested row."""
        i = self._index[call_id]
        depth = getattr(self._rows[i], "depth", 0)  # a record not yet built as a row is not nested
        j = i + 1
        while j < len(self._rows) and getattr(self._rows[j], "depth", 0) > depth:
            j += 1
        return j

    def _insert_at(self, pos: int, row: TimelineRow) -> None:
        self.beginInsertRows(QModelIndex(), pos, pos)
        self._rows.insert(pos, row)
        for j in range(pos, len(self._rows)):
            item = self._rows[j]
            self._index[item.call_id if isinstance(item, TimelineRow) else item.id] = j
        self._seen_server(row)
        self.endInsertRows()

    def _name_server(self, row: TimelineRow) -> None:
        if row.server is not None and self.mcp_names is not None and recorded_server(row.record) is None:
            known = self.mcp_names(row.name, "")  # no result yet: its server's real name, as reported
            row.server = known.server if known else row.server

    def _seen_server(self, row: TimelineRow) -> None:
        self._name_server(row)
        if row.server is not None:
            self._servers.add(row.server)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        self._insert([r for r in pending if r.call_id not in self._index])

    def upsert_started(self, call_id: str, name: str, data: dict[str, Any], session_id: str = "",
                       at: float = 0.0) -> None:
        """A tool:start event: add a PENDING row (inserts are batched to the next loop turn)."""
        row = self._find(call_id)
        if row is not None:
            if data:
                row.input = data
                row.summary = call_headline(row.name, data)
                self._changed(call_id)
            return
        self._pending.append(
            TimelineRow(call_id, name, call_headline(name, data), ToolCallState.PENDING, session_id, at,
                        input=dict(data), server=mcp_server_of(name), label=call_label(name))
        )
        self._flush.start()

    def set_state(self, call_id: str, state: str, name: str = "", session_id: str = "") -> None:
        row = self._find(call_id)
        if row is None:
            self.upsert_started(call_id, name, {}, session_id)
            row = self._find(call_id)
        if row is not None:
            row.state = ToolCallState(state)
            self._changed(call_id)

    def end(self, call_id: str, state: str, outcome: str | None, duration_ms: float | None) -> None:
        row = self._find(call_id)
        if row is None:
            return
        if state:
            row.state = ToolCallState(state)
        row.outcome = outcome
        row.duration_ms = duration_ms
        self._changed(call_id)

    def update_record(self, rec: ToolCallRecord) -> None:
        """A full record (from the store): it has the exit code, the result and the trail."""
        row = self._find(rec.id)
        if row is None:
            self._insert([TimelineRow.from_record(rec)])
            return
        fresh = self._nest(TimelineRow.from_record(rec))
        for name in TimelineRow.__slots__:
            setattr(row, name, getattr(fresh, name))
        self._seen_server(row)
        self._changed(rec.id)

    def append_output(self, call_id: str, text: str) -> None:
        chunks = self._output.setdefault(call_id, [])
        if sum(map(len, chunks)) < _MAX_OUTPUT:
            chunks.append(text)
        self.outputAppended.emit(call_id, text)

    def output(self, call_id: str) -> str:
        return "".join(self._output.get(call_id, ()))

    def clear(self) -> None:
        self.beginResetModel()
        self._rows.clear()
        self._index.clear()
        self._pending.clear()
        self._output.clear()
        self._servers.clear()
        self._children.clear()
        self.endResetModel()

    # lookup ------------------------------------------------------------------------------------
    def row_of(self, call_id: str) -> int:
        self._flush_if_pending(call_id)
        return self._index.get(call_id, -1)

    def row_at(self, row: int) -> TimelineRow:
        return self._materialize(row)

    def rows_built(self) -> int:
        """How many rows have been built; the others are still the records they were loaded as."""
        return sum(isinstance(item, TimelineRow) for item in self._rows)

    def filter_facts(self, row: int) -> tuple[str, str, str | None]:
        """(state, tool, MCP server) of a row, without building it: what the filter proxy reads."""
        item = self._rows[row]
        if isinstance(item, TimelineRow):
            return item.state.value, item.name, item.server
        if _may_have_server(item):
            row_ = self._materialize(row)
            return row_.state.value, row_.name, row_.server
        return item.state.value, item.name, None

    def get(self, call_id: str) -> TimelineRow | None:
        return self._find(call_id)

    def tools(self) -> list[str]:
        return sorted({r.name for r in self._rows})

    def servers(self) -> list[str]:
        """The MCP servers the shown calls went to."""
        return sorted(self._servers)

    def _flush_if_pending(self, call_id: str) -> None:
        if self._pending and any(r.call_id == call_id for r in self._pending):
            self._flush.stop()
            self.flush()

    def _find(self, call_id: str) -> TimelineRow | None:
        i = self._index.get(call_id)
        if i is not None:
            return self._materialize(i)
        for r in self._pending:
            if r.call_id == call_id:
                return r
        return None

    def _changed(self, call_id: str) -> None:
        i = self._index.get(call_id)
        if i is not None:
            self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.COLUMNS) - 1))
        self.rowChanged.emit(call_id)
