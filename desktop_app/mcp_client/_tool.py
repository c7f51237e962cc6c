"""An MCP server's tool as a desk `Tool`: `mcp__<server>__<tool>`, its input checked against the server's
JSON Schema, its hints as read-only and risk, and its result as text, images and resources."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jsonschema
import mcp_types
from jsonschema.exceptions import SchemaError

from ..core import (
    MCP_GROUP,
    CallField,
    ImageBlock,
    McpToolInfo,
    Risk,
    Sandbox,
    SandboxDescription,
    TextBlock,
    Tool,
    ToolContext,
    ToolInputError,
    ToolResult,
    label_from_name,
    mcp_fields,
    mcp_tool_name,
)

if TYPE_CHECKING:
    from ._server import McpServer

MAX_DESCRIPTION = 2000  # characters of a server's tool description sent to the model
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
GROUP = f"group:{MCP_GROUP}"


class BadToolSchema(ValueError):
    """A server's input schema that is not a JSON Schema of an object: the tool is not offered."""


def checked_schema(tool: mcp_types.Tool) -> tuple[dict[str, Any], Any]:
    """The tool's input schema as given, and a validator for it; BadToolSchema when it is not valid JSON
    Schema or not an object's (the Messages API refuses a whole request over one such tool)."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BadToolSchema(f"tool {tool.name!r}: the input schema must be a JSON Schema with \"type\": \"object\"")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise BadToolSchema(f"tool {tool.name!r}: the input schema is not valid JSON Schema: {e.message}") from None
    except RecursionError:
        raise BadToolSchema(f"tool {tool.name!r}: the input schema is nested too deeply") from None
    return schema, cls(schema)


MCP_CACHE_TTL_S = 60.0


class McpTool(Tool[Any]):
    """One tool of one server. Instance attributes stand in for the class attributes of built-in tools."""

    def __init__(self, server: McpServer, tool: mcp_types.Tool, schema: dict[str, Any], validator: Any) -> None:
        self.server = server
        self.mcp_name = tool.name
        hints = tool.annotations
        read_only = bool(hints and hints.read_only_hint)
        destructive = bool(hints and hints.destructive_hint) and not read_only
        self.name = mcp_tool_name(server.name, tool.name)  # type: ignore[misc]
        self.description = _description(server.name, tool)  # type: ignore[misc]
        # the server's title for it (`title`, then the annotations', as the spec ranks them), else one from its
        # name; always with the server's name, so a server cannot pass its tool off as the desk's "Read file"
        title = " ".join(str(tool.title or (hints.title if hints else None) or "").split())[:80]
        self.label = f"{title} ({server.name})" if title else label_from_name(self.name)  # type: ignore[misc]
        self.read_only = read_only  # type: ignore[misc]
        self.group = GROUP  # type: ignore[misc]
        self.risk = Risk.HIGH if destructive else (Risk.LOW if read_only else Risk.MEDIUM)  # type: ignore[misc]
        # read-only and idempotent by its own word: the same call within a minute, nothing written since,
        # reuses the result (a stale answer at worst; what may run is judged as before)
        idempotent = bool(hints and hints.idempotent_hint)
        self.cache_ttl_s = MCP_CACHE_TTL_S if read_only and idempotent else None  # type: ignore[misc]
        self.destructive = destructive
        self._schema = schema
        self._validator = validator
        self._api = {"name": self.name, "description": self.description, "input_schema": schema}
        self.is_enabled: Callable[[str], bool] = lambda name: True  # the hub's view of the person's switches

    @property
    def trusted_read_only(self) -> bool:
        """A hint is the server's own claim (the MCP spec: never trust hints from untrusted servers). Only a
        server of the person's own settings is taken at its word; a project's (a repository's) read-only tool
        is scheduled as a read, but the policy judges it as a write."""
        return self.read_only and self.server.info.source == "user"

    def info(self, enabled: bool = True) -> McpToolInfo:
        return McpToolInfo(server=self.server.name, name=self.mcp_name, description=self.description,
                           read_only=self.read_only, destructive=self.destructive, enabled=enabled)

    def input_schema(self) -> dict[str, Any]:
        return self._schema

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        """The server, the tool by the server's own name, then the arguments in the schema's order."""
        return mcp_fields(self.server.name, self.mcp_name, raw, (self._schema.get("properties") or {}).keys())

    def to_api(self) -> dict[str, Any]:
        return self._api

    def parse(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The input, checked against the server's schema; errors name the field, as pydantic's do."""
        if not isinstance(raw, dict):
            raise ToolInputError("the input must be a JSON object")
        try:
            errors = sorted(self._validator.iter_errors(raw), key=lambda e: list(e.absolute_path))[:5]
        except RecursionError:
            raise ToolInputError("the input is nested too deeply") from None
        if errors:
            problems = "; ".join(f"field `{_field(e)}`: {e.message[:300]}" for e in errors)
            required = self._schema.get("required") or []
            hint = f"{self.name} requires: {', '.join(map(str, required))}" if required else ""
            raise ToolInputError(problems, hint=hint)
        return raw

    async def validate(self, args: dict[str, Any], ctx: ToolContext) -> None:
        if not self.is_enabled(self.name):
            raise ToolInputError(f"{self.name} is switched off in the project's settings")

    def where(self, sandbox: Sandbox | None) -> SandboxDescription | None:
        return self.server.describe()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        async def progress(done: float, total: float | None, message: str | None) -> None:
            amount = f"{done:g}/{total:g}" if total else f"{done:g}"
            ctx.update(f"{amount} {message}".rstrip() + "\n", "progress")

        result = await self.server.call(self.mcp_name, args, progress)
        return self.result(result)

    def result(self, result: mcp_types.CallToolResult) -> ToolResult:
        blocks = [b for c in result.content for b in _blocks(c)]
        if not blocks and result.structured_content is not None:
            blocks = [TextBlock(json.dumps(result.structured_content, ensure_ascii=False))]
        info = self.server.info
        details = {"mcp_server": info.name, "mcp_server_version": info.version, "mcp_where": info.where.value,
                   "mcp_tool": self.mcp_name}
        return ToolResult(content=blocks or [TextBlock("")], details=details, is_error=bool(result.is_error))


def _description(server: str, tool: mcp_types.Tool) -> str:
    text = (tool.description or tool.title or tool.name).strip()
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 1] + "…"
    return f"{text}\n(MCP server {server})"


def _field(e: Any) -> str:
    path = ".".join(str(p) for p in e.absolute_path)
    if e.validator == "required" and isinstance(e.instance, dict):
        missing = next((r for r in e.validator_value if r not in e.instance), "")
        return f"{path}.{missing}" if path else str(missing)
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        allowed = set(e.schema.get("properties") or {})
        extra = next((k for k in e.instance if k not in allowed), "")
        return f"{path}.{extra}" if path else str(extra)
    return path or "(input)"


def _blocks(c: Any) -> list[TextBlock | ImageBlock]:
    if isinstance(c, mcp_types.TextContent):
        return [TextBlock(c.text)]
    if isinstance(c, mcp_types.ImageContent):
        if c.mime_type in IMAGE_TYPES and _is_base64(c.data):
            return [ImageBlock(c.mime_type, c.data)]
        return [TextBlock(f"[image {c.mime_type}, {_size(c.data)} not shown: not a PNG, JPEG, GIF or WebP]")]
    if isinstance(c, mcp_types.AudioContent):
        return [TextBlock(f"[audio {c.mime_type}, {_size(c.data)} not shown]")]
    if isinstance(c, mcp_types.EmbeddedResource):
        r = c.resource
        if isinstance(r, mcp_types.TextResourceContents):
            return [TextBlock(f"[resource {r.uri}]\n{r.text}")]
        return [TextBlock(f"[resource {r.uri}: {r.mime_type or 'binary'}, {_size(r.blob)} not shown]")]
    if isinstance(c, mcp_types.ResourceLink):
        return [TextBlock(f"[resource link {c.uri}: {c.name}]")]
    return [TextBlock(f"[{getattr(c, 'type', 'unknown')} content not shown]")]


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _size(b64: str) -> str:
    return f"{len(b64) * 3 // 4} bytes"
