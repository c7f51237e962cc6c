"""The Anthropic model client: one streamed Messages-API step in, typed events out, the assistant message back.

`AnthropicModelClient` drives the real `anthropic.AsyncAnthropic` client. Text, thinking and partial
tool input are published as they stream; the SDK does the retries, and a middleware reports each one.
"""

from __future__ import annotations

import contextvars
import copy
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import ModelError
from ._events import ErrorEvent, TextChunk, ThinkingChunk, TokenUsage, ToolStart
from ._llm import DEFAULT_MODEL, Emit, ModelReply, ModelRequest, ModelUsage
from ._messages import ToolCall
from ._pricing import estimate_cost

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)
# A streaming tool input is shown at most this often, with strings cut to PREVIEW_CHARS.
PARTIAL_INPUT_EVERY_S = 0.1
PARTIAL_JSON_MAX = 16_384  # of new input JSON per partial event: what a live view needs, redacted in place
PREVIEW_CHARS = 200

MISSING_KEY_HINT = (
    "Set it in Settings (kept in the keyring, service 'agent-desk'), or export ANTHROPIC_API_KEY."
)


def with_cache_control(request: ModelRequest) -> tuple[list[dict], list[dict], list[dict]]:
    """System, tools and messages with ephemeral cache marks on the system prompt, the last tool
    and the last message's last cacheable block. The stored history is not touched."""
    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": request.system, "cache_control": mark}] if request.system else []
    tools = [dict(t) for t in request.tools]
    if tools:
        tools[-1]["cache_control"] = mark
    messages = list(request.messages)
    if messages:
        last = copy.deepcopy(messages[-1])
        content = last.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in reversed(content or []):
            # Thinking blocks cannot carry a cache mark; empty text blocks are refused by the API.
            if block.get("type") not in ("thinking", "redacted_thinking"):
                block["cache_control"] = mark
                break
        last["content"] = content
        messages[-1] = last
    return system, tools, messages


# Retry reporting --------------------------------------------------------------------------------
_retry_report: contextvars.ContextVar[Callable[[int, str], None] | None] = contextvars.ContextVar(
    "agent_desk_retry_report", default=None
)


def _retryable_status(status: int, headers: Any) -> bool:
    # The SDK's own policy (anthropic._base_client._should_retry), restated to avoid a private call.
    flag = headers.get("x-should-retry") if headers is not None else None
    if flag == "true":
        return True
    if flag == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def _describe_status(status: int, body: Any) -> str:
    message = ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("type") or "")
    return f"HTTP {status}" + (f": {message}" if message else "")


class _RetryReporter:
    """SDK middleware, called once per HTTP attempt inside the SDK's retry loop: when an attempt
    failed and the SDK will try again, report it (to the step that set the context variable)."""

    def __init__(self, default_max_retries: int) -> None:
        self.default_max_retries = default_max_retries

    async def __call__(self, request: anthropic.APIRequest, call_next: Any) -> Any:
        from anthropic import APIConnectionError, NotGiven

        max_retries = request.max_retries
        if isinstance(max_retries, NotGiven):
            max_retries = self.default_max_retries
        will_retry = request.retries_taken < max_retries
        try:
            response = await call_next(request)
        except APIConnectionError as e:
            if will_retry:
                self._report(request.retries_taken + 1, f"connection failed: {e.message}")
            raise
        status = response.status_code
        if status >= 400 and will_retry and _retryable_status(status, response.headers):
            body: Any = None
            try:
                body = json.loads(await response.http_response.aread())
            except Exception:  # an unreadable error body still gets reported, by status alone
                body = None
            self._report(request.retries_taken + 1, _describe_status(status, body))
        return response

    @staticmethod
    def _report(attempt: int, message: str) -> None:
        report = _retry_report.get()
        if report is not None:
            report(attempt, message)


# The client -------------------------------------------------------------------------------------
class AnthropicModelClient:
    """Streams steps from the Anthropic Messages API (or any compatible endpoint at `base_url`)."""

    def __init__(
        self,
        *,
        api_key: str | None,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        max_tokens: int = 16000,
        max_retries: int = 2,
        timeout_s: float = 600.0,
        thinking_budget: int = 0,
        key_source: str = "",
        off_loop: bool = False,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.thinking_budget = thinking_budget
        self.key_source = key_source
        self._api_key = api_key
        self._client: anthropic.AsyncAnthropic | None = None
        # Stream in the model worker process (_model_worker.py), where it can run: the desk's loop then
        # only routes the events.
        self.off_loop = off_loop
        self._link: Any = None

    def __repr__(self) -> str:  # never the key
        return f"<AnthropicModelClient model={self.model} base_url={self.base_url or 'default'}>"

    @property
    def has_api_key(self) -> bool:
        return bool(self._api_key)

    def _sdk(self) -> anthropic.AsyncAnthropic:
        self._sdk_key()
        if self._client is None:
            import anthropic

            # ANTHROPIC_AUTH_TOKEN goes as `Authorization: Bearer`, as the SDK's auth_token; else the x-api-key.
            key = {"auth_token": self._api_key, "api_key": None} if self.key_source == "env-token" else {
                "api_key": self._api_key}
            self._client = anthropic.AsyncAnthropic(
                **key,
                base_url=self.base_url,
                max_retries=self.max_retries,
                timeout=_timeout(self.timeout_s),
                middleware=[_RetryReporter(self.max_retries)],
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._link is not None:
            from ._model_worker import release

            link, self._link = self._link, None
            release(link)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        system, tools, messages = with_cache_control(request)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": messages,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        if self.thinking_budget > 0:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            params["max_tokens"] = max(params["max_tokens"], self.thinking_budget + 1024)
        return params

    async def stream(self, request: ModelRequest, *, emit: Emit, session_id: str = "") -> ModelReply:
        """Run one step. Raises ModelError (clear message) when the endpoint fails for good."""
        if self.off_loop:
            link = await self._worker()
            if link is not None:
                return await link.stream(AnthropicModelClient, self._config(), request, emit, session_id)
        return await self._stream_here(request, emit, session_id)

    def warm_up(self) -> None:
        """Start the model worker process ahead of the first step (blocking for a moment: call it in a
        thread); nothing to do when the streams run on the loop."""
        if self.off_loop and self._api_key:
            from ._model_worker import prestart

            prestart()

    async def _worker(self) -> Any:
        from ._model_worker import worker_link

        self._sdk_key()  # raises before any request when no key is set
        if self._link is None or self._link.broken:
            link = await worker_link()
            if link is not None:
                link.users += 1
            self._link = link
        return self._link

    def _config(self) -> tuple[tuple[str, Any], ...]:
        """The settings the worker builds this client's twin from (the base URL resolved here, where the
        environment is the desk's)."""
        return (("api_key", self._api_key), ("key_source", self.key_source), ("model", self.model),
                ("base_url", self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None),
                ("max_tokens", self.max_tokens), ("max_retries", self.max_retries),
                ("timeout_s", self.timeout_s), ("thinking_budget", self.thinking_budget))

    def _sdk_key(self) -> None:
        if not self._api_key:
            raise ModelError("No Anthropic API key is set.", hint=MISSING_KEY_HINT)

    async def _stream_here(self, request: ModelRequest, emit: Emit, session_id: str) -> ModelReply:
        import anthropic

        client = self._sdk()  # raises before any request when no key is set
        params = self._params(request)
        started = time.perf_counter()

        def report(attempt: int, message: str) -> None:
            emit(
                ErrorEvent(
                    session_id=session_id,
                    source="model",
                    message=f"{message}; retrying (attempt {attempt} of {self.max_retries})",
                    retrying=True,
                    attempt=attempt,
                    phase="model",
                    severity="warn",
                )
            )

        token = _retry_report.set(report)
        acc = _Accumulator(self.model, emit, session_id)
        try:
            stream = await _create(client, params)
            async with stream:
                async for event in stream:
                    acc.feed(event)
        except anthropic.APIError as e:
            raise self._error(e) from e
        except ModelError:
            raise
        except Exception as e:
            # httpx errors raised while reading the body (a cut stream) are not wrapped by the SDK.
            if type(e).__module__.startswith(("httpx", "httpcore", "h11")):
                raise ModelError(
                    f"The model's answer stream broke off: {type(e).__name__}: {e}",
                    hint="Retry the step; the partial answer was dropped.",
                ) from e
            raise
        finally:
            _retry_report.reset(token)
        reply = acc.finish()
        reply.duration_ms = (time.perf_counter() - started) * 1000.0
        return reply

    def _error(self, e: anthropic.APIError) -> ModelError:
        import anthropic

        where = self.base_url or "api.anthropic.com"
        if isinstance(e, anthropic.APIStatusError):
            return self._status_error(e)
        if isinstance(e, anthropic.APITimeoutError):
            return ModelError(
                f"The model endpoint at {where} did not answer in time (after {self.max_retries} retries).",
                hint="Check the network, then retry the step.",
            )
        if isinstance(e, anthropic.APIConnectionError):
            return ModelError(
                f"Could not reach the model endpoint at {where} (after {self.max_retries} retries).",
                hint="Check the network and the base URL, then retry the step.",
            )
        return ModelError(f"The model endpoint failed: {e.message}", hint="Retry the step.")

    def _status_error(self, e: anthropic.APIStatusError) -> ModelError:
        api_message = e.api_message or ""
        err_type = e.type or ""
        status = e.status_code
        detail = api_message or e.message
        if status == 200:  # an `error` event inside a stream
            return ModelError(
                f"The model stream failed: {err_type or 'error'}: {detail}",
                hint="Retry the step; the partial answer was dropped.",
                status_code=529 if err_type == "overloaded_error" else 500,
            )
        message, hint = self._status_message(status, err_type, api_message, detail)
        return ModelError(message, hint=hint, status_code=status)

    def _status_message(self, status: int, err_type: str, api_message: str, detail: str) -> tuple[str, str]:
        """What to tell the person about an HTTP error status: the message and a hint."""
        if status == 401:
            return (
                f"The API rejected the API key (401 {err_type or 'authentication_error'}"
                f"{': ' + api_message if api_message else ''}). Check the API key.",
                f"Check the API key{_SOURCES.get(self.key_source, '')}. {MISSING_KEY_HINT}",
            )
        if status == 400:
            return f"The API refused the request (400): {detail}", ""
        if status == 403:
            return f"The API key may not do this (403): {detail}", ""
        if status == 404:
            where = self.base_url or "api.anthropic.com"
            return f"Not found (404): {detail}", f"Check the model name ({self.model!r}) and the base URL ({where})."
        if status == 529 or err_type == "overloaded_error":
            return (f"The API is overloaded (529) and still was after {self.max_retries} retries.",
                    "Retry the step in a moment.")
        if status == 429:
            return (f"Rate limited (429) after {self.max_retries} retries: {detail}",
                    "Wait a moment, then retry the step.")
        return f"The API failed ({status}) after {self.max_retries} retries: {detail}", "Retry the step."


_SOURCES = {
    "keyring": " stored in the keyring",
    "settings": " stored in the settings file",
    "env": " in ANTHROPIC_API_KEY",
    "env-token": " in ANTHROPIC_AUTH_TOKEN (sent as a bearer token)",
}


def _timeout(seconds: float) -> Any:
    """The request bound `seconds` (a long generation may stream for minutes), but the SDK's own short bound on
    opening the connection: an endpoint whose packets are dropped (a wrong base URL behind a firewall, a proxy
    gone) fails its attempt in seconds, not after the whole request bound (a plain number bounds both)."""
    import anthropic

    return anthropic.Timeout(seconds, connect=min(anthropic.DEFAULT_TIMEOUT.connect or seconds, seconds))


async def _create(client: anthropic.AsyncAnthropic, params: dict[str, Any]) -> Any:
    """One streamed step of `messages.create`. The body is encoded here once, by the json module's C encoder, as
    the SDK would send it (UTF-8, compact, no NaN), and posted through the SDK's client (its headers, retries,
    errors and stream parsing); the SDK's own walk copies the whole conversation and encodes it in Python, a third
    of a long conversation's step. A value that is not plain JSON goes the SDK's way."""
    import anthropic
    from anthropic.types import Message, RawMessageStreamEvent

    try:
        body = json.dumps({**params, "stream": True}, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()
    except (TypeError, ValueError):
        return await client.messages.create(**params, stream=True)
    return await client.post("/v1/messages", content=body, cast_to=Message, stream=True,
                             stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
                             options={"headers": {"Content-Type": "application/json"}})


class _Accumulator:
    """Builds the assistant message from raw stream events and publishes progress as it goes."""

    def __init__(self, model: str, emit: Emit, session_id: str) -> None:
        self.model = model
        self.emit = emit
        self.session_id = session_id
        self.message_id = ""
        self.blocks: dict[int, dict[str, Any]] = {}
        # Tool input JSON as it streams: the parts, how many were already published, and when.
        self.json_parts: dict[int, list[str]] = {}
        self.json_sent: dict[int, tuple[int, float]] = {}
        self.stop_reason: str | None = None
        self.usage = ModelUsage()
        self.stopped = False

    def feed(self, event: Any) -> None:
        kind = event.type
        if kind == "content_block_delta":
            self._delta(event.index, event.delta)
        elif kind == "content_block_start":
            self._start(event.index, event.content_block)
        elif kind == "content_block_stop":
            self._publish_partial(event.index, final=True)
        elif kind == "message_start":
            msg = event.message
            self.message_id = msg.id
            self.model = msg.model or self.model
            self._usage(msg.usage)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason
            self._usage(event.usage)
        elif kind == "message_stop":
            self.stopped = True

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        u = self.usage
        # message_delta's counts are cumulative: take them when present.
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            value = getattr(usage, name, None)
            if value is not None:
                setattr(u, name, value)

    def _start(self, index: int, block: Any) -> None:
        btype = block.type
        if btype == "text":
            self.blocks[index] = {"type": "text", "text": block.text or ""}
            if block.text:
                self.emit(TextChunk(session_id=self.session_id, text=block.text, message_id=self.message_id))
        elif btype == "thinking":
            self.blocks[index] = {"type": "thinking", "thinking": block.thinking or "", "signature": ""}
        elif btype == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": block.data}
        elif btype == "tool_use":
            self.blocks[index] = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            self.json_parts[index] = []
            self.json_sent[index] = (0, 0.0)
            self.emit(ToolStart(session_id=self.session_id, tool_use_id=block.id, name=block.name, partial=True))
        else:  # server tools and future block kinds: keep them as sent
            self.blocks[index] = block.model_dump(exclude_none=True)

    def _delta(self, index: int, delta: Any) -> None:
        block = self.blocks.get(index)
        if block is None:
            raise ModelError(f"The model stream sent a delta for unknown block {index}.")
        dtype = delta.type
        if dtype == "text_delta":
            block["text"] += delta.text
            self.emit(TextChunk(session_id=self.session_id, text=delta.text, message_id=self.message_id))
        elif dtype == "input_json_delta":
            if not delta.partial_json:
                return  # the API opens every tool input with an empty delta: nothing new to show
            self.json_parts.setdefault(index, []).append(delta.partial_json)
            self._publish_partial(index)
        elif dtype == "thinking_delta":
            block["thinking"] += delta.thinking
            self.emit(ThinkingChunk(session_id=self.session_id, text=delta.thinking, message_id=self.message_id))
        elif dtype == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        elif dtype == "citations_delta":
            block.setdefault("citations", []).append(delta.citation.model_dump(exclude_none=True))

    def _publish_partial(self, index: int, *, final: bool = False) -> None:
        """Show a tool's input as it streams, at most every PARTIAL_INPUT_EVERY_S.

        Each event carries only the JSON added since the previous one (concatenated, they are the whole
        input) and a preview of the object so far, so a large fs_write costs O(n), not O(n^2), in events.
        """
        parts = self.json_parts.get(index)
        block = self.blocks.get(index)
        if not parts or block is None or block["type"] != "tool_use":
            return
        sent, last = self.json_sent.get(index, (0, 0.0))
        now = time.monotonic()
        if sent == len(parts) or (not final and sent and now - last < PARTIAL_INPUT_EVERY_S):
            return
        self.json_sent[index] = (len(parts), now)
        self.emit(
            ToolStart(
                session_id=self.session_id,
                tool_use_id=block["id"],
                name=block["name"],
                input=input_preview(json_head(parts)),
                partial_json=_head_of(parts, sent, PARTIAL_JSON_MAX),
                partial=True,
            )
        )

    def finish(self) -> ModelReply:
        if not self.stopped:
            raise ModelError(
                "The model's answer stream ended before message_stop.",
                hint="Retry the step; the partial answer was dropped.",
            )
        content: list[dict[str, Any]] = []
        tool_uses: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block["type"] == "tool_use":
                raw = "".join(self.json_parts.get(index, ()))
                parsed, error = _parse_input(raw)
                # The history must hold an object; malformed input is kept raw on the ToolCall.
                block["input"] = parsed if parsed is not None else {}
                tool_uses.append(ToolCall(block["id"], block["name"], parsed, raw, error))
            elif block["type"] == "text" and not block["text"]:
                continue  # the API refuses empty text blocks in history
            content.append(block)
        u = self.usage
        u.cost_usd = estimate_cost(
            self.model,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_creation_input_tokens=u.cache_creation_input_tokens,
            cache_read_input_tokens=u.cache_read_input_tokens,
        )
        self.emit(
            TokenUsage(
                session_id=self.session_id,
                model=self.model,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_creation_input_tokens=u.cache_creation_input_tokens,
                cache_read_input_tokens=u.cache_read_input_tokens,
                cost_usd=u.cost_usd,
            )
        )
        return ModelReply(
            message_id=self.message_id,
            model=self.model,
            content=content,
            tool_uses=tool_uses,
            stop_reason=self.stop_reason,
            usage=u,
        )


def _parse_input(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    if not raw.strip():
        return {}, None  # a tool without parameters streams no JSON at all
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return None, f"the input is not valid JSON ({e.msg} at char {e.pos})"
    if not isinstance(value, dict):
        return None, f"the input must be a JSON object, got {type(value).__name__}"
    return value, None


def _preview(value: Any, limit: int = PREVIEW_CHARS, more: str = "") -> Any:
    """The partial input with long strings cut, for live display (the full input comes at the end)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… ({len(value):,}{more} chars so far)"
    if isinstance(value, dict):
        return {k: _preview(v, limit, more) for k, v in value.items()}
    if isinstance(value, list):
        return [_preview(v, limit, more) for v in value[:50]]
    return value


PREVIEW_PARSE_CHARS = 65_536  # of a tool's input JSON streaming in, what the live preview parses


def input_preview(head: str) -> dict[str, Any]:
    """The live preview of a tool input from the head of its JSON: at most PREVIEW_PARSE_CHARS of it are
    parsed, so each event costs the same however large the input grows (parsing all of it at every
    event was quadratic: 11 s on the loop for a 20 MB fs_write). Pass a head one character longer to
    say that more follows."""
    if len(head) <= PREVIEW_PARSE_CHARS:
        return _preview(_partial_object(head))
    return _preview(_partial_object(head[:PREVIEW_PARSE_CHARS]), more="+")


def json_head(parts: list[str]) -> str:
    """The first PREVIEW_PARSE_CHARS + 1 characters of the parts joined, without joining them all."""
    out, n = [], 0
    for p in parts:
        out.append(p)
        n += len(p)
        if n > PREVIEW_PARSE_CHARS:
            break
    return "".join(out)[: PREVIEW_PARSE_CHARS + 1]


def _partial_object(buf: str) -> dict[str, Any]:
    """Best-effort view of a JSON object still streaming in (for the live timeline)."""
    try:
        from jiter import from_json  # the SDK's own partial-JSON parser
    except ImportError:
        return {}
    try:
        value = from_json(buf.encode(), partial_mode="trailing-strings")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _head_of(parts: list[str], start: int, limit: int) -> str:
    """The first `limit` characters of parts[start:], joined without copying the rest."""
    out: list[str] = []
    size = 0
    for part in parts[start:]:
        out.append(part[: limit - size])
        size += len(out[-1])
        if size >= limit:
            break
    return "".join(out)
