"""Plugin tools: installed Python packages add tools through the `agent_desk.tools` entry point group (as
OpenClaw's registerTool). A plugin's tool is a `core.Tool` like a built-in, and goes through the same schema
validation, policy, approvals, hooks, audit and sandbox (`ctx.sandbox` is all it is given to run commands).

A plugin is code the person installed on their own machine, so it runs in the desk's process: the desk does
not take its word on what is safe. Its tools are in `group:plugin` whatever group they claim (a claim of
`group:fs` would pass accept-edits unasked), and a read-only claim schedules a call as a read but never waives
the person's approval. A name that is not a tool name, or that looks like a built-in's or another plugin's,
is refused. A plugin that fails to load is one notice; the others load. `plugins_disabled` (tool or package
names) switches any of them off."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ..core import CallField, Sandbox, SandboxDescription, Tool, ToolContext, ToolResult, name_refusal

log = logging.getLogger(__name__)

PLUGIN_GROUP = "agent_desk.tools"
PLUGIN_TOOL_GROUP = "group:plugin"
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One entry point of the group, as `doctor` and the window list it."""

    entry: str  # the entry point's name
    package: str
    version: str
    tools: tuple[str, ...] = ()
    enabled: bool = True
    problem: str = ""

    def line(self) -> str:
        what = ", ".join(self.tools) or self.entry
        state = "off (plugins_disabled)" if not self.enabled else (f"refused: {self.problem}" if self.problem
                                                                     else "on")
        return f"{what} from {self.package} {self.version}: {state}"


@dataclass(slots=True)
class Plugins:
    tools: list[Tool] = field(default_factory=list)
    found: list[PluginInfo] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [f"The plugin {p.entry} from {p.package} {p.version} is not loaded: {p.problem}"
                for p in self.found if p.problem]


class PluginTool(Tool):
    """A plugin's tool as the desk runs it: the plugin's schema, description and code, the desk's group and
    trust. Everything else is the plugin's own (its hooks, dry run, timeout)."""

    def __init__(self, inner: Tool, package: str, version: str) -> None:
        self.inner, self.package, self.package_version = inner, package, version
        self.name = inner.name  # type: ignore[misc]  # per instance: each plugin names its own tool
        self.description = inner.description  # type: ignore[misc]
        self.input_model = inner.input_model  # type: ignore[misc]
        self.read_only = inner.read_only  # type: ignore[misc]
        self.timeout_s = inner.timeout_s  # type: ignore[misc]
        self.risk = inner.risk  # type: ignore[misc]
        self.group = PLUGIN_TOOL_GROUP  # type: ignore[misc]
        self.version = inner.version or version  # type: ignore[misc]
        self.tags = (*inner.tags, "plugin")  # type: ignore[misc]
        # the plugin's label, or one from its name; never one of the desk's own (a plugin is not "Run command")
        self.label = _own_label(inner)  # type: ignore[misc]

    @property
    def trusted_read_only(self) -> bool:
        return False

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "plugin": self.package, "plugin_version": self.package_version}

    def input_schema(self) -> dict[str, Any]:
        return self.inner.input_schema()

    def pre_hooks(self) -> list[Any]:
        return self.inner.pre_hooks()

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return self.inner.card_fields(raw)

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        return self.inner.outcome_fields(raw, result)

    def post_hooks(self) -> list[Any]:
        return self.inner.post_hooks()

    def parse(self, raw: dict[str, Any]) -> Any:
        return self.inner.parse(raw)

    async def validate(self, args: Any, ctx: ToolContext) -> None:
        await self.inner.validate(args, ctx)

    async def dry_run(self, args: Any, ctx: ToolContext) -> str | None:
        return await self.inner.dry_run(args, ctx)

    def timeout_for(self, args: Any) -> float | None:
        return self.inner.timeout_for(args)

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult | str:
        return await self.inner.run(args, ctx)

    def where(self, sandbox: Sandbox | None) -> SandboxDescription | None:
        return sandbox.describe() if sandbox is not None else None  # the session's sandbox, never elsewhere


def _own_label(inner: Tool) -> str:
    from ._tool_labels import desk_labels

    label = inner.display_label
    return label if label.casefold() not in desk_labels() else f"{label} (plugin {inner.name})"


def _tools_of(obj: Any) -> list[Tool]:
    """What an entry point gives: a Tool, a Tool class, a list of them, or a function returning either."""
    if isinstance(obj, type) and issubclass(obj, Tool):
        obj = obj()
    elif callable(obj) and not isinstance(obj, Tool):
        obj = obj()
    items = list(obj) if isinstance(obj, list | tuple) else [obj]
    bad = [type(x).__name__ for x in items if not isinstance(x, Tool)]
    if bad or not items:
        raise TypeError(f"it gives {', '.join(bad) or 'nothing'}, not agent-desk tools (desktop_app.core.Tool)")
    return items


def _refusal(tool: Tool, taken: Iterable[str]) -> str | None:
    taken = list(taken)
    if not _TOOL_NAME.fullmatch(tool.name or ""):
        return f"its tool name {tool.name!r} is not letters, digits, '_' or '-' (at most 64)"
    if tool.name in taken:
        return f"a tool named {tool.name!r} exists already (a built-in's or another plugin's)"
    return name_refusal(tool.name, taken, what="tool name")


def load_plugins(disabled: Iterable[str] = (), builtin_names: Iterable[str] = (),
                 found: Iterable[EntryPoint] | None = None) -> Plugins:
    """Every plugin of the group, loaded unless switched off; blocking (imports): call it on a worker thread."""
    off = set(disabled)
    taken = list(builtin_names)
    out = Plugins()
    eps = sorted(found if found is not None else entry_points(group=PLUGIN_GROUP), key=lambda e: e.name)
    for ep in eps:
        dist = getattr(ep, "dist", None)
        package, version = (dist.name, dist.version) if dist is not None else ("(unknown package)", "")
        if ep.name in off or package in off:
            out.found.append(PluginInfo(ep.name, package, version, enabled=False))
            continue
        try:
            tools = _tools_of(ep.load())
        except Exception as exc:  # a plugin's own bug: one notice, and the others load
            log.warning("plugin %s (%s %s) did not load", ep.name, package, version, exc_info=True)
            said = f"loading it raised {type(exc).__name__}: {exc}"
            out.found.append(PluginInfo(ep.name, package, version, problem=said))
            continue
        if all(t.name in off for t in tools):  # switched off by its tools' names
            out.found.append(PluginInfo(ep.name, package, version, tuple(t.name for t in tools), enabled=False))
            continue
        tools = [t for t in tools if t.name not in off]
        names: list[str] = []
        refused = None
        for t in tools:
            refused = _refusal(t, [*taken, *names])
            if refused:
                break
            names.append(t.name)
        if refused:
            out.found.append(PluginInfo(ep.name, package, version, tuple(t.name for t in tools), problem=refused))
            continue
        taken += names
        out.tools += [PluginTool(t, package, version) for t in tools]
        out.found.append(PluginInfo(ep.name, package, version, tuple(names)))
    return out
