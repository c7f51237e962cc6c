"""The tool registry: groups of tools, profiles that choose which tools the model sees, and which of those are
offered at all (not switched off by the person, not denied outright by a rule)."""

from __future__ import annotations

from collections.abc import Iterable

from ._errors import ConfigError, ToolNotFound
from ._tool import Tool
from .policy import Action, Rule, ToolFacts

# A profile is a set of tool names and groups; "*" means every registered tool.
PROFILES: dict[str, frozenset[str]] = {
    "minimal": frozenset({"fs_read", "fs_glob", "fs_grep", "todo_read", "todo_write"}),
    "read-only": frozenset({"@read_only"}),
    "coding": frozenset({"group:fs", "group:runtime", "group:todo", "group:person", "group:vcs", "group:web",
                         "group:plugin"}),
    "full": frozenset({"*"}),
}
TOOL_PROFILES: tuple[str, ...] = tuple(PROFILES)


class ToolRegistry:
    """Name -> Tool, with group and profile lookups."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        if not tool.name or not tool.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"tool name {tool.name!r} must be letters, digits, '_' or '-'")
        if tool.name in self._tools and not replace:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        """Forget a tool (an MCP server's tool that went away); unknown names are ignored."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFound(f"unknown tool {name!r}") from None

    def find(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def group(self, group: str) -> list[Tool]:
        return [t for t in self._tools.values() if t.group == group]

    def for_profile(self, profile: str) -> list[Tool]:
        try:
            spec = PROFILES[profile]
        except KeyError:
            raise ConfigError(
                f"unknown tool profile {profile!r}", hint=f"choose one of {', '.join(PROFILES)}"
            ) from None
        return [t for t in self._tools.values() if _in_profile(t, spec)]


def _in_profile(tool: Tool, spec: frozenset[str]) -> bool:
    return (
        "*" in spec
        or tool.name in spec
        or tool.group in spec
        or ("@read_only" in spec and tool.read_only)
    )


def denied_outright(tool: Tool, rules: Iterable[Rule]) -> Rule | None:
    """The deny rule with no argument pattern that covers `tool` (by name, group, `*` or prefix), if any: such
    a tool could never run, so it is not offered to the model."""
    facts = ToolFacts(tool.name, tool.group, tool.read_only)
    for rule in rules:
        if rule.action is Action.DENY and rule.pattern is None and rule.applies_to(facts):
            return rule
    return None


def offered_tools(tools: Iterable[Tool], *, disabled: Iterable[str] = (), rules: Iterable[Rule] = ()) -> list[Tool]:
    """`tools` less those the person switched off (`disabled`, by name) and those denied outright by `rules`."""
    off, rules = frozenset(disabled), list(rules)
    return [t for t in tools if t.name not in off and denied_outright(t, rules) is None]
