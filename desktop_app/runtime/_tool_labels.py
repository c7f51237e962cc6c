"""The desk's one `ToolLabels`: the built-in and agent tools always, and each open project runtime's registry
(its plugins, its MCP servers' tools) while it lives. The window's rows and cards and the audit report ask it
for a call's label and summary."""

from __future__ import annotations

from ..core import Tool, ToolLabels, ToolRegistry

_labels: ToolLabels | None = None


def _desk_tools() -> list[Tool]:
    from ..tools import GitCommit, SkillTool, TaskRun, builtin_tools

    # git_commit and skill are made per runtime (a repository, a skill catalogue); their cards read nothing
    # of either, so a bare instance stands for them here
    return [*builtin_tools(), TaskRun(), object.__new__(GitCommit), object.__new__(SkillTool)]


def tool_labels() -> ToolLabels:
    """The process's catalogue of tool labels (made on first use)."""
    global _labels
    if _labels is None:
        _labels = ToolLabels(_desk_tools())
    return _labels


def desk_labels() -> frozenset[str]:
    """The labels of the desk's own tools, case-folded: no plugin may take one."""
    return frozenset(t.display_label.casefold() for t in _desk_tools())


def label_runtime_tools(registry: ToolRegistry) -> None:
    """A project runtime's tools label their calls while it is open."""
    tool_labels().watch(registry)
