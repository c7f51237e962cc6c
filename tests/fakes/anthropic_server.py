"""A local Anthropic-compatible Messages API server that replays scripted turns over real HTTP.

The real `anthropic` client talks to it unchanged (set `base_url=server.url`). Each POST to
/v1/messages consumes the next turn of the script and is answered the way the real API answers:
server-sent events for `stream: true` (message_start, content_block_*, ping, message_delta with
usage and stop_reason, message_stop), a JSON message otherwise, or an error (HTTP status with the
API's error body, an `error` SSE event, or a connection cut mid-stream). Every request is recorded.

    with AnthropicServer([reply(text("Reading it."), tool_use("fs_read", {"path": "a.txt"})),
                          lambda req: reply(text(f"It says {req.last_tool_result_text()}"))]) as srv:
        client = anthropic.AsyncAnthropic(api_key=srv.api_key, base_url=srv.url)
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "AnthropicServer",
    "CutStream",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "StreamError",
    "TextPart",
    "ThinkingPart",
    "ToolUsePart",
    "Turn",
    "bad_request",
    "overloaded",
    "reply",
    "text",
    "thinking",
    "tool_use",
    "unauthorized",
]


# Content parts ----------------------------------------------------------------------------------
@dataclass
class TextPart:
    text: str
    chunk: int = 12  # characters per text_delta


@dataclass
class ThinkingPart:
    thinking: str
    signature: str = "sig-fake"
    chunk: int = 16


@dataclass
class ToolUsePart:
    name: str
    input: dict[str, Any] | None = None
    id: str = field(default_factory=lambda: f"toolu_{uuid.uuid4().hex[:24]}")
    raw_json: str | None = None  # sent verbatim instead of json.dumps(input): malformed input
    pieces: int = 3  # input_json_delta events the JSON is split across

    @property
    def json_text(self) -> str:
        return self.raw_json if self.raw_json is not None else json.dumps(self.input or {})


Part = TextPart | ThinkingPart | ToolUsePart


def text(s: str, *, chunk: int = 12) -> TextPart:
    return TextPart(s, chunk)


def thinking(s: str, *, signature: str = "sig-fake") -> ThinkingPart:
    return ThinkingPart(s, signature)


def tool_use(
    name: str, input: dict[str, Any] | None = None, *, id: str | None = None, raw_json: str | None = None,
    pieces: int = 3,
) -> ToolUsePart:
    part = ToolUsePart(name, input, raw_json=raw_json, pieces=pieces)
    if id:
        part.id = id
    return part


# Turns ------------------------------------------------------------------------------------------
@dataclass
class Reply:
    """A successful answer. `stop_reason` defaults to tool_use when a tool is called, else end_turn."""

    parts: list[Part]
    stop_reason: str | None = None
    usage: dict[str, int] | None = None  # overrides the computed usage
    event_delay_s: float = 0.0  # pause between SSE events (a slow model, for interrupt tests)
    hold: threading.Event | None = None  # stream the first event, then wait for this before the rest

    def resolved_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(isinstance(p, ToolUsePart) for p in self.parts) else "end_turn"


@dataclass
class HttpError:
    """Answer with an HTTP error status and the API's error body (before any stream starts)."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamError:
    """Stream `reply` but send an `error` SSE event after `after_events` events, then stop."""

    reply: Reply
    after_events: int = 3
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class CutStream:
    """Stream `reply` but drop the connection after `after_events` events (no terminating chunk)."""

    reply: Reply
    after_events: int = 3


Turn = Reply | HttpError | StreamError | CutStream | Callable[["RecordedRequest"], Any]


def reply(*parts: Part, stop_reason: str | None = None, usage: dict[str, int] | None = None,
          event_delay_s: float = 0.0, hold: threading.Event | None = None) -> Reply:
    return Reply(list(parts), stop_reason, usage, event_delay_s, hold)


def overloaded(retry_after_ms: int = 1) -> HttpError:
    return HttpError(529, "overloaded_error", "Overloaded", {"retry-after-ms": str(retry_after_ms)})


def unauthorized() -> HttpError:
    return HttpError(401, "authentication_error", "invalid x-api-key")


def bad_request(message: str) -> HttpError:
    return HttpError(400, "invalid_request_error", message)


# Requests ---------------------------------------------------------------------------------------
@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float
    handled_s: float = 0.0  # time the server spent answering (for the engine-overhead benchmark)
    turn_index: int | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def tool_results(self) -> list[dict[str, Any]]:
        """tool_result blocks of the last user message, in order."""
        for msg in reversed(self.messages):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, list):
                    return [b for b in content if b.get("type") == "tool_result"]
                return []
        return []

    def last_tool_result_text(self) -> str:
        results = self.tool_results()
        if not results:
            return ""
        content = results[-1].get("content")
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")

    def last_user_text(self) -> str:
        for msg in reversed(self.messages):
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        return ""


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _split(s: str, n: int) -> list[str]:
    if n <= 1 or len(s) <= 1:
        return [s]
    size = max(1, -(-len(s) // n))
    return [s[i : i + size] for i in range(0, len(s), size)]


def _estimate_tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj)) // 4)


def reply_events(rep: Reply, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of `rep`, exactly in the real API's order and shape."""
    model = body.get("model", "claude-fake")
    msg_id = f"msg_{uuid.uuid4().hex[:24]}"
    input_tokens = _estimate_tokens({k: body.get(k) for k in ("system", "tools", "messages")})
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if rep.usage:
        usage.update(rep.usage)
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {k: usage[k] for k in usage if k != "output_tokens"} | {"output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    output = 0
    for index, part in enumerate(rep.parts):
        if isinstance(part, TextPart):
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            for piece in _split(part.text, -(-len(part.text) // max(1, part.chunk))):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": piece}}))
            output += _estimate_tokens(part.text)
        elif isinstance(part, ThinkingPart):
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "thinking", "thinking": "",
                                                                     "signature": ""}}))
            for piece in _split(part.thinking, -(-len(part.thinking) // max(1, part.chunk))):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "thinking_delta", "thinking": piece}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "signature_delta",
                                                             "signature": part.signature}}))
            output += _estimate_tokens(part.thinking)
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "tool_use", "id": part.id,
                                                                     "name": part.name, "input": {}}}))
            raw = part.json_text
            # The real API opens with an empty partial_json delta.
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": ""}}))
            for piece in _split(raw, part.pieces):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": piece}}))
            output += _estimate_tokens(raw)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    usage_out = rep.usage.get("output_tokens", output) if rep.usage else output
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": rep.resolved_stop_reason(), "stop_sequence": None},
                                     "usage": {"output_tokens": usage_out}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def reply_message(rep: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The same answer as one JSON message (for `stream: false`)."""
    content: list[dict[str, Any]] = []
    for part in rep.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            content.append({"type": "thinking", "thinking": part.thinking, "signature": part.signature})
        else:
            try:
                parsed = json.loads(part.json_text)
            except json.JSONDecodeError:
                parsed = {}
            content.append({"type": "tool_use", "id": part.id, "name": part.name, "input": parsed})
    usage = {"input_tokens": _estimate_tokens(body.get("messages")), "output_tokens": 1,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if rep.usage:
        usage.update(rep.usage)
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": body.get("model", "claude-fake"), "content": content,
            "stop_reason": rep.resolved_stop_reason(), "stop_sequence": None, "usage": usage}


# The server -------------------------------------------------------------------------------------
class AnthropicServer:
    """Serves `script` (a list of turns, consumed one per request) on 127.0.0.1, on a free port.

    A turn may be a callable taking the RecordedRequest and returning a turn, so a reply can depend
    on what the client sent. `api_key` (None: any) is checked like the real API (401 otherwise).
    When the script runs out the server answers 400 "script exhausted" (never retried).
    """

    def __init__(self, script: Iterable[Turn] = (), *, api_key: str | None = "sk-ant-test-fake-key") -> None:
        self.api_key = api_key or "sk-ant-any"
        self._check_key = api_key is not None
        self._script: list[Turn] = list(script)
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.gets: list[tuple[str, dict[str, str]]] = []  # GET requests (doctor), path and headers
        self.exhausted = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._request_seen = threading.Condition(self._lock)

    # lifecycle
    def start(self) -> AnthropicServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> AnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # script
    def add(self, *turns: Turn) -> None:
        """Append turns to the script (also while serving)."""
        with self._lock:
            self._script.extend(turns)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script) - self._next

    def _take(self) -> tuple[int | None, Turn | None]:
        with self._lock:
            if self._next >= len(self._script):
                return None, None
            i = self._next
            self._next += 1
            return i, self._script[i]

    def _record(self, req: RecordedRequest) -> None:
        with self._request_seen:
            self.requests.append(req)
            self._request_seen.notify_all()

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        """Block (a thread, not the event loop) until `n` requests arrived."""
        with self._request_seen:
            return self._request_seen.wait_for(lambda: len(self.requests) >= n, timeout)

    @property
    def server_time_s(self) -> float:
        """Total time the server spent answering, summed over requests."""
        return sum(r.handled_s for r in self.requests)


def _make_handler(server: AnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real API; bodies are chunked or sized
        disable_nagle_algorithm = True  # each SSE event leaves at once, as from the real API

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            return

        def do_POST(self) -> None:
            start = time.perf_counter()
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if len(raw) < length:  # the client went away mid-request (killed): as for the real API, no request
                self.close_connection = True  # reached the model, so none is recorded (test_crash's burst)
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            req = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                received_at=time.time(),
            )
            server._record(req)  # before answering: the client may look as soon as it has the answer
            try:
                self._answer(req)
            finally:
                req.handled_s = time.perf_counter() - start

        def do_GET(self) -> None:
            """GET /v1/models, as `agent-desk doctor` asks it: 200 with the right key, 401 without."""
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.gets.append((self.path, headers))
            if not self.path.split("?")[0].endswith("/v1/models"):
                self._error(HttpError(404, "not_found_error", f"Not found: {self.path}"))
            elif server._check_key and server.api_key not in (
                    headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")):
                self._error(unauthorized())
            else:
                self._json(200, {"data": [{"id": "claude-sonnet-4-6", "type": "model"}], "has_more": False})

        def _answer(self, req: RecordedRequest) -> None:
            if not req.path.split("?")[0].endswith("/v1/messages"):
                self._error(HttpError(404, "not_found_error", f"Not found: {req.path}"))
                return
            if server._check_key and server.api_key not in (
                req.headers.get("x-api-key"),
                req.headers.get("authorization", "").removeprefix("Bearer "),
            ):
                self._error(unauthorized())
                return
            index, turn = server._take()
            req.turn_index = index
            while callable(turn):
                turn = turn(req)
            if turn is None:
                server.exhausted += 1
                self._error(HttpError(400, "invalid_request_error", "fake server: script exhausted",
                                      {"x-should-retry": "false"}))
                return
            if isinstance(turn, HttpError):
                self._error(turn)
            elif isinstance(turn, Reply):
                if req.body.get("stream"):
                    self._stream(reply_events(turn, req.body), turn)
                else:
                    self._json(200, reply_message(turn, req.body))
            elif isinstance(turn, StreamError):
                events = reply_events(turn.reply, req.body)[: turn.after_events]
                events.append(("error", {"type": "error",
                                         "error": {"type": turn.error_type, "message": turn.message}}))
                self._stream(events, turn.reply)
            elif isinstance(turn, CutStream):
                self._stream(reply_events(turn.reply, req.body)[: turn.after_events], turn.reply, cut=True)
            else:
                raise TypeError(f"not a turn: {turn!r}")

        def _json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, err: HttpError) -> None:
            self._json(err.status, {"type": "error", "error": {"type": err.error_type, "message": err.message}},
                       err.headers)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(self, events: list[tuple[str, dict[str, Any]]], rep: Reply, *, cut: bool = False) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
            self.end_headers()
            try:
                for i, (name, data) in enumerate(events):
                    self._chunk(_sse(name, data))
                    if i == 0 and rep.hold is not None:
                        rep.hold.wait(30)
                    elif rep.event_delay_s:
                        time.sleep(rep.event_delay_s)
                if cut:
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away (an interrupt): fine

    return Handler
