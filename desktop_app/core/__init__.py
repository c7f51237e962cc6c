"""The engine: tools, registry, permission policy, hooks, tool-call records, executor and event bus.

Pure asyncio; imports neither Qt nor docker, so it runs headless and tests without a display or an engine.
"""

from ._errors import (
    AgentDeskError,
    ConfigError,
    IllegalTransition,
    ModelError,
    PathOutsideWorkspace,
    SandboxError,
    StoreError,
    ToolInputError,
    ToolNotFound,
)
from ._events import (
    EVENT_TYPES,
    Channel,
    Done,
    Envelope,
    ErrorEvent,
    Event,
    EventBus,
    PermissionDecided,
    PermissionRequired,
    StateChanged,
    TextChunk,
    ThinkingChunk,
    TokenUsage,
    ToolEnd,
    ToolError,
    ToolExecuted,
    ToolStart,
    ToolUpdate,
)
from ._executor import Decision, Executor, RunContext, SealReport, ToolCall, tool_result_block
from ._hooks import (
    DangerousCommandHook,
    HookCall,
    HookChain,
    OutputTruncationHook,
    PostAction,
    PostHookResult,
    PreAction,
    PreHookResult,
    SecretRedactionHook,
    builtin_hooks,
    dangerous_reason,
    post_hook,
    pre_hook,
)
from ._policy import (
    Action,
    PermissionMode,
    PermissionPolicy,
    PolicyDecision,
    Rule,
    RuleSet,
    ToolFacts,
    append_rule_to_file,
    load_rules,
    project_rules_path,
    suggest_rule,
)
from ._record import (
    TERMINAL_STATES,
    TRANSITIONS,
    Approval,
    AuditEntry,
    Outcome,
    Provenance,
    ToolCallRecord,
    ToolCallState,
)
from ._registry import GROUPS, PROFILES, ToolRegistry
from ._shell import ParsedCommand, parse_command
from ._store import MemoryStore, ProjectInfo, RecordStore, SessionInfo, StoredMessage, new_session
from ._tool import ImageBlock, TextBlock, Tool, ToolContext, ToolInput, ToolResult, tool

__all__ = [
    "EVENT_TYPES", "GROUPS", "PROFILES", "TERMINAL_STATES", "TRANSITIONS",
    "Action", "AgentDeskError", "Approval", "AuditEntry", "Channel", "ConfigError", "DangerousCommandHook",
    "Decision", "Done", "Envelope", "ErrorEvent", "Event", "EventBus", "Executor", "HookCall", "HookChain",
    "IllegalTransition", "ImageBlock", "MemoryStore", "ModelError", "Outcome", "OutputTruncationHook",
    "ParsedCommand", "PathOutsideWorkspace", "PermissionDecided", "PermissionMode", "PermissionPolicy",
    "PermissionRequired", "PolicyDecision", "PostAction", "PostHookResult", "PreAction", "PreHookResult",
    "ProjectInfo", "Provenance", "RecordStore", "Rule", "RuleSet", "RunContext", "SandboxError", "SealReport",
    "SecretRedactionHook", "SessionInfo", "StateChanged", "StoreError", "StoredMessage", "TextBlock",
    "TextChunk", "ThinkingChunk", "TokenUsage", "Tool", "ToolCall", "ToolCallRecord", "ToolCallState",
    "ToolContext", "ToolEnd", "ToolError", "ToolExecuted", "ToolFacts", "ToolInput", "ToolInputError",
    "ToolNotFound", "ToolRegistry", "ToolResult", "ToolStart", "ToolUpdate", "append_rule_to_file",
    "builtin_hooks", "dangerous_reason", "load_rules", "new_session", "parse_command", "post_hook", "pre_hook",
    "project_rules_path", "suggest_rule", "tool", "tool_result_block",
]
