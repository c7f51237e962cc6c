"""Tool result caching (Kode's cacheable/cacheTTL): a tool that declares `cache_ttl_s` and is read-only may
answer a repeated identical call from the result of the first, within the time to live, while the workspace is
unchanged. "Unchanged" is a generation the runner bumps whenever a call that may write starts or ends and
whenever the host changes a file: any of those and every cached result is stale. The cache is in memory, per
project runtime (its sessions share the workspace), keyed by the tool and a digest of the real input, and a
hit is recorded as such (the EXECUTING entry names the call whose result it is)."""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ._tool import ToolResult

MAX_CACHED = 256


@dataclass(frozen=True, slots=True)
class CachedResult:
    result: ToolResult
    call_id: str
    at: float  # monotonic seconds
    generation: int


class ResultCache:
    def __init__(self, max_entries: int = MAX_CACHED) -> None:
        self.generation = 0
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CachedResult] = OrderedDict()

    def changed(self) -> None:
        """The workspace may have changed: every result cached so far is stale."""
        self.generation += 1
        self._entries.clear()

    @staticmethod
    def key(tool: str, raw_input: Any) -> str:
        body = json.dumps(raw_input, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{tool}\0{body}".encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, tool: str, raw_input: Any, ttl_s: float) -> CachedResult | None:
        k = self.key(tool, raw_input)
        hit = self._entries.get(k)
        if hit is None:
            return None
        if hit.generation != self.generation or time.monotonic() - hit.at > ttl_s:
            del self._entries[k]
            return None
        self._entries.move_to_end(k)
        return hit

    def put(self, tool: str, raw_input: Any, result: ToolResult, call_id: str) -> None:
        self._entries[self.key(tool, raw_input)] = CachedResult(result, call_id, time.monotonic(), self.generation)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
