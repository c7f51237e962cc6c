"""The window's status bar: what the agent is doing, the model, where the API key and endpoint come from,
the sandbox, the image builds running, and the session's tokens."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QTextDocument
from PySide6.QtWidgets import QLabel, QMainWindow, QPushButton

from ..core import ErrorEvent, SandboxSurvivors, TokenUsage
from ._bridge import EventBridge
from ._build_log import show_build_log
from ._builds import ImageBuilds, elapsed_text

_LEVEL_COLOURS = {"green": "#2f9e44", "amber": "#d4890b", "red": "#d9363e"}
_ACTION_WORDS = {"build": "Build", "pick": "Pick…", "fix": "Fix…", "retry": "Check again"}
_KEY_WORDS = {"env": "ANTHROPIC_API_KEY", "env-token": "ANTHROPIC_AUTH_TOKEN", "keyring": "keyring",
              "settings": "settings file"}


class _ElidedLabel(QLabel):
    """A one-line label that gives way on a narrow window: its dot and its words elided at the right, so the
    parts after it (the tokens) stay whole; `text()` is still the whole text."""

    dot_colour = "#8a8f98"

    def minimumSizeHint(self) -> QSize:
        return QSize(90, super().minimumSizeHint().height())

    def paintEvent(self, event) -> None:
        if self.sizeHint().width() <= self.width():
            super().paintEvent(event)
            return
        doc = QTextDocument()
        doc.setHtml(self.text())
        plain = doc.toPlainText()
        r = self.contentsRect()
        p = QPainter(self)
        dot = plain[:1] if plain.startswith("●") else ""
        if dot:
            p.setPen(QColor(self.dot_colour))
            p.drawText(r, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, dot)
            r.setLeft(r.left() + self.fontMetrics().horizontalAdvance(dot))
        p.setPen(self.palette().color(self.foregroundRole()))
        rest = self.fontMetrics().elidedText(plain[len(dot):], Qt.TextElideMode.ElideRight, r.width())
        p.drawText(r, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, rest)
        p.end()


class AgentStatusBar:
    """The model; the sandbox (status, image, network); this session's tokens and cost."""

    def __init__(self, window: QMainWindow) -> None:
        bar = window.statusBar()
        self.activity = QLabel()
        self.model = QLabel("model: –")
        self.key = QLabel("key: –")
        self.sandbox = _ElidedLabel("sandbox: –")
        self.usage = QLabel("0 tokens · $0.00")
        self.sandbox_action = QPushButton()  # Build, Pick…, Fix… or Check again: what the sandbox line needs
        self.sandbox_action.setMaximumHeight(22)
        self.sandbox_action.hide()
        self._action_slot: Callable[[], object] | None = None
        self.sandbox_action.clicked.connect(lambda: self._action_slot() if self._action_slot else None)
        self.sandbox_level = ""  # green, amber or red: the last check of the project in view
        for w in (self.model, self.key, self.sandbox, self.usage):
            w.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.activity, 1)
        bar.addPermanentWidget(self.model)
        bar.addPermanentWidget(self.key)
        bar.addPermanentWidget(self.sandbox)
        bar.addPermanentWidget(self.sandbox_action)
        self.builds = QPushButton()  # "⚙ Building … · 0:42" while any image build runs: opens its log
        self.builds.setFlat(True)
        self.builds.setMaximumHeight(22)
        self.builds.hide()
        bar.addPermanentWidget(self.builds)
        bar.addPermanentWidget(self.usage)
        self._usage: dict[str, list[float]] = {}  # session -> [input, output, cost]
        self._session = ""
        self._current_session: Callable[[], str | None] = lambda: None

    def follow_builds(self, builds: ImageBuilds, window: QMainWindow) -> None:
        """Show the running image builds (started from any dialog, closed since or not) with their elapsed time;
        a click opens the first one's log, with its Cancel."""
        self._builds = builds
        self._build_tick = QTimer(self.builds, interval=1000)  # its timeout is the follower's refresh too
        self._build_tick.timeout.connect(self.show_builds)
        builds.changed.connect(self._build_tick.timeout)  # a QObject of this window: gone with it, never called dead
        self.builds.clicked.connect(lambda: (b := builds.running()) and show_build_log(b[0], window))
        self.show_builds()

    def show_builds(self) -> None:
        running = self._builds.running()
        if not running:
            self._build_tick.stop()
            self.builds.hide()
            return
        first = running[0]
        more = f" (+{len(running) - 1} more)" if len(running) > 1 else ""
        self.builds.setText(f"⚙ {first.title}{more} · {elapsed_text(first.elapsed())}")
        self.builds.setToolTip("An image build is running: click to see its log, or to cancel it")
        self.builds.show()
        if not self._build_tick.isActive():
            self._build_tick.start()

    def attach(self, bridge: EventBridge, current_session: Callable[[], str | None]) -> None:
        """Count every session's tokens (shown for the current one) and show the current one's retries."""
        self._current_session = current_session
        bridge.tokenUsage.connect(self._on_usage)
        bridge.errorOccurred.connect(self._on_error)
        bridge.sandboxSurvivors.connect(self._on_survivors)

    def _on_survivors(self, ev: SandboxSurvivors) -> None:
        """A small notice: what the session's end killed, and (in red) what still runs."""
        if ev.alive:
            names = ", ".join(f"{p.get('pid')} {str(p.get('command'))[:40]}" for p in ev.alive[:3])
            head = f"<b style='color:#d9363e'>{len(ev.alive)} sandbox process(es) still running:</b>"
            self.activity.setText(f"{head} {names}")
        elif ev.killed:
            names = ", ".join(str(p.get("command"))[:30] for p in ev.killed[:3])
            self.activity.setText(f"session end: killed {len(ev.killed)} sandbox process(es): {names}")
        self.activity.setToolTip("\n".join(f"{p.get('pid')}: {p.get('command')} — {p.get('started_by')}"
                                            for p in [*ev.alive, *ev.killed]))

    def _on_usage(self, ev: TokenUsage) -> None:
        self.add_usage(ev)
        if ev.model:
            self.set_model(ev.model)

    def _on_error(self, ev: ErrorEvent) -> None:
        if ev.retrying and (not ev.session_id or ev.session_id == self._current_session()):
            self.activity.setText(f"{ev.message} — retrying (attempt {ev.attempt})")

    def set_model(self, name: str) -> None:
        self.model.setText(f"model: {name}")

    def set_sources(self, key_source: str | None, base_url_source: str, base_url: str | None) -> None:
        """Where the API key and the endpoint come from (never the key itself): the environment overrides
        what is stored, so the person sees which one a turn uses."""
        self.key.setText(f"key: {_KEY_WORDS.get(key_source or '', 'not set')}")
        key_line = {"env": "API key: from ANTHROPIC_API_KEY (the environment; it overrides a stored key)",
                    "keyring": "API key: from the system keyring",
                    "settings": "API key: from the settings file (no keyring backend)"}.get(
                        key_source or "", "API key: not set (File › Settings…, or export ANTHROPIC_API_KEY)")
        url_line = {"env": f"Endpoint: {base_url} (from ANTHROPIC_BASE_URL; it overrides the settings)",
                    "settings": f"Endpoint: {base_url} (from the settings)"}.get(
                        base_url_source, "Endpoint: the Anthropic API (default)")
        self.key.setToolTip(f"{key_line}\n{url_line}")

    def set_sandbox(self, status: str, image: str = "", network: str = "", unsafe: bool = False,
                    where: str = "") -> None:
        colour = {"running": "#2f9e44", "ready": "#2f9e44", "starting": "#d4890b"}.get(status, "#d9363e")
        parts = [f"<span style='color:{colour}'>●</span> sandbox: {status}"]
        if image:
            parts.append(image)
        if network:
            parts.append(f"network {network}")
        if where:  # "remote engine, synced workspace (tcp://…)"
            parts.append(html.escape(where))
        if unsafe:
            parts.append("<b style='color:#d9363e'>UNSANDBOXED</b>")
        self.sandbox.setText(" · ".join(parts))
        self.sandbox.dot_colour = colour
        self.sandbox_level = {"#2f9e44": "green", "#d4890b": "amber"}.get(colour, "red")
        self.sandbox_action.hide()

    def show_check(self, level: str, text: str, detail: str = "", action: str = "",
                   on_action: Callable[[], object] | None = None) -> None:
        """A project's sandbox as checked: a red, amber or green dot, plain words, and the button that fixes it
        (hidden when nothing needs doing)."""
        self.sandbox_level = level
        colour = _LEVEL_COLOURS.get(level, "#8a8f98")
        self.sandbox.setText(f"<span style='color:{colour}'>●</span> {html.escape(text)}")
        self.sandbox.dot_colour = colour
        self.sandbox.setToolTip(f"{text}\n{detail}" if detail else text)
        self._action_slot = on_action if action else None
        self.sandbox_action.setText(_ACTION_WORDS.get(action, action))
        self.sandbox_action.setToolTip(detail)
        self.sandbox_action.setVisible(bool(action and on_action))

    def add_usage(self, ev: TokenUsage) -> None:
        u = self._usage.setdefault(ev.session_id, [0, 0, 0.0])
        u[0] += ev.input_tokens + ev.cache_creation_input_tokens + ev.cache_read_input_tokens
        u[1] += ev.output_tokens
        u[2] += ev.cost_usd
        if ev.session_id == self._session:
            self.show_session(self._session)

    def has_usage(self, session_id: str) -> bool:
        return session_id in self._usage

    def show_session(self, session_id: str) -> None:
        self._session = session_id
        i, o, cost = self._usage.get(session_id, [0, 0, 0.0])
        self.usage.setText(f"{int(i):,} in · {int(o):,} out · ${cost:.4f}")
