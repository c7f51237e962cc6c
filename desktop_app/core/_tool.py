"""What a tool is: a name, a pydantic input model, a read-only flag, metadata (version, tags), its own pre and
post hooks, and an async `run` that may stream output (`ctx.update`) and publish custom events (`ctx.emit`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from ._call_summary import (
    CallField,
    CallSummary,
    default_summary,
    error_words,
    input_fields,
    label_from_name,
    outcome_fields,
)
from ._call_summary import summary_of as _summary_of
from ._events import Event, TodoChanged
from ._record import Risk

if TYPE_CHECKING:
    from ._sandbox import Sandbox, SandboxDescription


@dataclass(slots=True, frozen=True)
class TextBlock:
    text: str

    def to_api(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(slots=True, frozen=True)
class ImageBlock:
    media_type: str  # image/png, image/jpeg, image/gif, image/webp
    data: str  # base64

    def to_api(self) -> dict[str, Any]:
        return {"type": "image", "source": {"type": "base64", "media_type": self.media_type, "data": self.data}}


ContentBlock = TextBlock | ImageBlock


@dataclass(slots=True)
class ToolResult:
    """Content for the model, details for the UI, and whether it is an error."""

    content: list[ContentBlock] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False

    @classmethod
    def text(cls, text: str, **details: Any) -> ToolResult:
        return cls(content=[TextBlock(text)], details=details)

    @classmethod
    def error(
        cls, error: str, recommendations: list[str] | None = None, **details: Any
    ) -> ToolResult:
        body = {"ok": False, "error": error, "recommendations": recommendations or []}
        return cls(content=[TextBlock(json.dumps(body, ensure_ascii=False))], details=details, is_error=True)

    @property
    def text_content(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def error_text(self) -> str:
        """What went wrong, in words, for a record's `error`: see `error_words`."""
        return error_words(self.text_content)

    def to_api_content(self) -> list[dict[str, Any]]:
        return [b.to_api() for b in self.content]

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.to_api_content(), "details": self.details, "is_error": self.is_error}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolResult:
        blocks: list[ContentBlock] = []
        for b in d.get("content") or []:
            if b.get("type") == "image":
                blocks.append(ImageBlock(b["source"]["media_type"], b["source"]["data"]))
            else:
                blocks.append(TextBlock(b.get("text", "")))
        return cls(content=blocks, details=d.get("details") or {}, is_error=bool(d.get("is_error")))


UpdateFn = Callable[[str, str], None]
EmitFn = Callable[[str, dict[str, Any]], None]
PublishFn = Callable[[Event], None]


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use. It never touches the host: it asks `sandbox`."""

    call_id: str
    session_id: str
    sandbox: Sandbox | None
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    # A tool's own keys, kept for the session (read hashes for fs_*, the todo list, ...).
    state: dict[str, Any] = field(default_factory=dict)
    project_id: str = ""
    deadline: float | None = None  # monotonic time when the executor will cancel the call
    _update: UpdateFn | None = None
    _emit: EmitFn | None = None
    _publish: PublishFn | None = None
    # The person, for tools that ask them (ask_user, exit_plan_mode): a core.PendingQuestions.
    person: Any = None
    # The workspace paths (/workspace/...) changed on the host since a tool last read or wrote them: the
    # session's own set (RunContext.host_changed), so a tool's discard is the session's.
    host_changed: set[str] = field(default_factory=set)
    # The session's sub-agents, for task_run: a core.Subagents (typed Any: _subagents builds on tools), or
    # None when this session cannot start any.
    subagents: Any = None
    # The labels the desk set on the session's run (a sub-agent's name, template, task, parent): shown on the
    # cards of its calls, questions and plans.
    labels: dict[str, Any] = field(default_factory=dict)

    def todos_changed(self, todos: list[dict[str, Any]], counts: dict[str, int]) -> None:
        """The session's todo list was replaced: `todo_changed`, with the new list and its counts."""
        if self._publish is not None:
            self._publish(TodoChanged(session_id=self.session_id, call_id=self.call_id,
                                      todos=[dict(t) for t in todos], counts=dict(counts)))

    def emit(self, name: str, data: dict[str, Any] | None = None) -> None:
        """Publish a custom event of this call (`tool:custom`): the timeline shows it under the call, and
        the bus stores it (redacted) like every event. `data` must be JSON-serialisable."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("ctx.emit needs a non-empty event name")
        if self._emit is not None:
            self._emit(name.strip()[:100], dict(data or {}))

    def update(self, text: str, stream: str = "stdout") -> None:
        """Stream a chunk of output to the UI while the tool works."""
        if self._update is not None:
            self._update(text, stream)

    def remaining(self, default: float) -> float:
        if self.deadline is None:
            return default
        return max(0.0, min(default, self.deadline - time.monotonic()))


ArgsT = TypeVar("ArgsT", bound=BaseModel)


class ToolInput(BaseModel):
    """Base of tool input models: unknown fields are an error the model can read."""

    model_config = ConfigDict(extra="forbid")


class Tool(Generic[ArgsT]):
    """A tool the model can call. Subclass and set the class attributes, or use `@tool`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    input_model: ClassVar[type[BaseModel]] = ToolInput
    read_only: ClassVar[bool] = False
    timeout_s: ClassVar[float | None] = None
    group: ClassVar[str] = "group:custom"
    risk: ClassVar[Risk] = Risk.LOW  # a default the policy and hooks can raise
    version: ClassVar[str] = ""  # the tool's own version, recorded with each call's metadata
    tags: ClassVar[tuple[str, ...]] = ()  # free labels ("vcs", "network"); shown, never used to decide
    cache_ttl_s: ClassVar[float | None] = None  # a read-only tool's identical call may reuse a result this long
    label: ClassVar[str] = ""  # the tool's human name ("Run command"); empty: one made from its name

    def pre_hooks(self) -> list[Any]:
        """This tool's own pre hooks (`PreHook`s), run after the user's pre hooks, before approval. A tool
        overrides this to check or rewrite its input; they are judged like every pre hook (a raise denies)."""
        return []

    def post_hooks(self) -> list[Any]:
        """This tool's own post hooks (`PostHook`s), run on its result first, before the user's post hooks
        and before redaction and truncation."""
        return []

    def metadata(self) -> dict[str, Any]:
        """What the window and the audit show of the tool beside its name."""
        return {"version": self.version, "tags": list(self.tags), "read_only": self.read_only,
                "timeout_s": self.timeout_s, "group": self.group, "risk": str(self.risk)}

    def input_schema(self) -> dict[str, Any]:
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema()}

    def parse(self, raw: dict[str, Any]) -> ArgsT:
        return self.input_model.model_validate(raw)  # type: ignore[return-value]

    @property
    def trusted_read_only(self) -> bool:
        """Whether the policy may take this tool at its word as read-only (run it unasked in `ask` and
        `read-only` modes). A built-in tool's flag is the desk's own; another party's claim (an MCP server's
        readOnlyHint) still schedules the call as a read, but may not waive the person's approval."""
        return self.read_only

    async def validate(self, args: ArgsT, ctx: ToolContext) -> None:
        """Semantic checks beyond the schema; raise ToolInputError to refuse."""

    async def dry_run(self, args: ArgsT, ctx: ToolContext) -> str | None:
        """What the call would change, found without changing anything, before a person is asked (a file
        edit's diff against the file as it is now). Raise ToolInputError when the call would fail: it
        then fails at once and nobody is asked. None: this tool has nothing to show."""
        return None

    def timeout_for(self, args: ArgsT) -> float | None:
        """The executor's limit for this call, in seconds; a tool with its own timeout adds a grace."""
        return self.timeout_s

    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult | str:
        raise NotImplementedError

    def where(self, sandbox: Sandbox | None) -> SandboxDescription | None:
        """Where a call runs, for its record: the session's sandbox, unless the tool runs elsewhere (an MCP
        server on the host, over HTTP, or in a sandbox of its own)."""
        return sandbox.describe() if sandbox is not None else None

    def summarize(self, raw: dict[str, Any]) -> str:
        """One line that says what a call does, for the CLI and the tool:end event."""
        return summarize_input(raw)

    @property
    def display_label(self) -> str:
        """What a person calls the tool: its `label`, or one made from its name."""
        return self.label or label_from_name(self.name)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        """The fields of a call that matter, in order, for its approval card, row and report entry. The
        default: every input field, in the order of the input schema. A tool overrides it to say less, better
        (a command and its folder; a path and the diff)."""
        return input_fields(raw, self._input_order)

    @functools.cached_property
    def _input_order(self) -> tuple[str, ...]:
        """The input schema's properties in order (a pydantic schema is built anew on each call: once here)."""
        try:
            return tuple((self.input_schema().get("properties") or {}).keys())
        except Exception:  # a schema that cannot be built: the input's own order
            return ()

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        """What matters of a call's stored result (`ToolResult.to_dict()`): by default its error, or how much
        it gave back and its first line."""
        return outcome_fields(result)

    def card(self, raw: dict[str, Any] | None, result: dict[str, Any] | None = None) -> CallSummary:
        """The call as a person reads it: label, title, the fields that matter and, once it ended, what its
        result says. Built from the (redacted) input as stored; a tool whose own builder fails gets the
        default, so a card is never missing."""
        raw = raw if isinstance(raw, dict) else {}
        try:
            outcome = self.outcome_fields(raw, result) if result else ()
            return _summary_of(self.display_label, raw, self.card_fields(raw), result, outcome)
        except Exception:  # a plugin's builder: its card falls back, the call is unaffected
            return default_summary(self.name, raw, result, self.display_label)

    def __repr__(self) -> str:
        return f"<Tool {self.name}{' ro' if self.read_only else ''}>"


def summarize_input(data: dict[str, Any] | None, limit: int = 120) -> str:
    """One line that says what a call will do: the command for bash, the path for files, else the input."""
    data = data or {}
    # the person tools and task_run say their question, plan and task, never their JSON
    for key in ("command", "path", "pattern", "process_id", "file_path", "query", "url", "question", "task", "plan"):
        val = data.get(key)
        if isinstance(val, str) and val:
            text = val
            break
    else:
        text = json.dumps(data, ensure_ascii=False, separators=(",", " "))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FunctionTool(Tool[BaseModel]):
    """A Tool built by `@tool` from an async function."""

    def __init__(
        self,
        fn: Callable[..., Awaitable[Any]],
        *,
        name: str,
        description: str,
        input_model: type[BaseModel],
        read_only: bool,
        timeout_s: float | None,
        group: str,
        risk: Risk,
        ctx_param: str | None,
        validator: Callable[[BaseModel, ToolContext], Awaitable[None]] | None = None,
        version: str = "",
        tags: tuple[str, ...] = (),
        label: str = "",
    ) -> None:
        self._fn = fn
        self._ctx_param = ctx_param
        self._validator = validator
        # Instance attributes shadow the ClassVars on purpose: each function tool is its own kind.
        self.name = name  # type: ignore[misc]
        self.description = description  # type: ignore[misc]
        self.input_model = input_model  # type: ignore[misc]
        self.read_only = read_only  # type: ignore[misc]
        self.timeout_s = timeout_s  # type: ignore[misc]
        self.group = group  # type: ignore[misc]
        self.risk = risk  # type: ignore[misc]
        self.version = version  # type: ignore[misc]
        self.tags = tuple(tags)  # type: ignore[misc]
        self.label = label  # type: ignore[misc]
        self._pre: list[Any] = []
        self._post: list[Any] = []

    def pre_hooks(self) -> list[Any]:
        return list(self._pre)

    def post_hooks(self) -> list[Any]:
        return list(self._post)

    def pre_hook(self, fn: Callable[..., Awaitable[Any]]):
        """Decorate an async `(call: HookCall)` function as this tool's own pre hook."""
        fn.name = getattr(fn, "name", f"{self.name}:{fn.__name__}")  # type: ignore[attr-defined]
        self._pre.append(fn)
        return fn

    def post_hook(self, fn: Callable[..., Awaitable[Any]]):
        """Decorate an async `(call: HookCall, result: ToolResult)` function as this tool's own post hook."""
        fn.name = getattr(fn, "name", f"{self.name}:{fn.__name__}")  # type: ignore[attr-defined]
        self._post.append(fn)
        return fn

    async def validate(self, args: BaseModel, ctx: ToolContext) -> None:
        if self._validator is not None:
            await self._validator(args, ctx)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult | str:
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        if self._ctx_param:
            kwargs[self._ctx_param] = ctx
        return await self._fn(**kwargs)

    def validator(self, fn: Callable[[BaseModel, ToolContext], Awaitable[None]]):
        """Decorate an async `(args, ctx)` function as this tool's semantic validation."""
        self._validator = fn
        return fn


def tool(
    name: str | None = None,
    *,
    read_only: bool = False,
    timeout: float | None = None,
    group: str = "group:custom",
    risk: Risk | str = Risk.LOW,
    version: str = "",
    tags: tuple[str, ...] | list[str] = (),
    label: str = "",
) -> Callable[[Callable[..., Awaitable[Any]]], FunctionTool]:
    """Build a Tool from an async function: its signature is the schema, its docstring the description.

    A parameter annotated `ToolContext` receives the context and is not part of the schema.
    """

    def build(fn: Callable[..., Awaitable[Any]]) -> FunctionTool:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@tool needs an async function, got {fn!r}")
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        ctx_param = None
        for pname, param in inspect.signature(fn).parameters.items():
            ann = hints.get(pname, Any)
            if ann is ToolContext:
                ctx_param = pname
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (ann, Field(default=default))
        tname = name or fn.__name__
        model = create_model(
            f"{tname}_input", __config__=ConfigDict(extra="forbid"), **fields
        )
        doc = inspect.cleandoc(fn.__doc__ or tname)
        return FunctionTool(
            fn,
            name=tname,
            description=doc,
            input_model=model,
            read_only=read_only,
            timeout_s=timeout,
            group=group,
            risk=Risk.of(risk),
            ctx_param=ctx_param,
            version=version,
            tags=tuple(tags),
            label=label,
        )

    return build
