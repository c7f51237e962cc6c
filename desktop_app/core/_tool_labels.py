"""Which tool labels and summarises a call shown by name (a timeline row, an approval card, a history row, a
report entry): the live registries of open project runtimes first (their MCP tools carry the servers' titles,
their plugins are loaded), then the tools the desk always knows; a name nobody knows any more gets the
summary built from its name and input (core/_call_summary.py)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ._call_summary import CallSummary, default_summary, label_from_name
from ._registry import ToolRegistry
from ._tool import Tool


class ToolLabels:
    """Name -> the tool that builds a call's card, with a default for any other name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._known: dict[str, Tool] = {}
        self._live: weakref.WeakSet[ToolRegistry] = weakref.WeakSet()  # a closed runtime's drops out
        self.add(tools)

    def add(self, tools: Iterable[Tool]) -> None:
        for t in tools:
            self._known.setdefault(t.name, t)

    def watch(self, registry: ToolRegistry) -> None:
        """Also ask `registry` (a project runtime's: its MCP tools come and go), for as long as it lives."""
        self._live.add(registry)

    def find(self, name: str) -> Tool | None:
        for registry in list(self._live):
            found = registry.find(name)
            if found is not None:
                return found
        return self._known.get(name)

    def label(self, name: str) -> str:
        found = self.find(name)
        return found.display_label if found is not None else label_from_name(name)

    def summary(self, name: str, raw: dict[str, Any] | None, result: dict[str, Any] | None = None,
                redact: Callable[[str], str] | None = None) -> CallSummary:
        """The call's card (with its result's part once it ended), every text through `redact` when given."""
        found = self.find(name)
        card = found.card(raw, result) if found is not None else default_summary(name, raw, result)
        return card.redacted(redact) if redact is not None else card
