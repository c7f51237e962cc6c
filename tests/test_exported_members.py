"""Each package's public names are chosen on purpose (httpx's test_exported_members): the lists below are
the boundary between layers. Nothing crosses a package boundary except a name its package exports."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import desktop_app

ROOT = Path(desktop_app.__file__).parent
PACKAGES = ("core", "tools", "sandbox", "store", "ui", "mcp_client", "runtime")

EXPORTED: dict[str, list[str]] = {
    "core": [
        "title_from",  # a session's title from a prompt (redacted first)
        # tool labels and per-tool cards (issue 28 item 7)
        "CallField", "CallSummary", "ToolLabels", "default_summary", "input_fields", "label_from_name", "mcp_fields",
        "one_line", "outcome_fields", "value_text",
        "error_words",  # what went wrong, in words: a record's error, unpacked from the desk's JSON error body
        "ConsentKind", "ConsentStatus",  # consent to agent-writable project files
        "ALLOWLIST_SETTING", "NetworkAllowlist", "NetworkConnection", "is_ip_literal", "is_public",  # the allowlist
        "repository_refusal", "NETWORK_PRESETS",
        "MCP_GROUP", "McpServerInfo", "McpServerLife", "McpServersChanged", "McpServerState", "McpToolInfo", "McpWhere",
        "mcp_tool_name", "split_mcp_tool_name", "ProcessChannel",
        "CONFLICT_SUFFIX", "SyncReport", "remove_beneath", "symlink_beneath",
        # checkpoints and rewind (issue 26)
        "Checkpoint", "CheckpointError", "ShadowStore", "REWIND_TOOL", "RewindDone", "RewindError", "RewindPlan",
        "apply_rewind", "plan_rewind", "record_rewind",
        "BRANCH_OF", "BranchPoint", "branch_session", "first_call_from", "point_before_call", "point_before_turn",
        "starts_a_turn",
        # project instructions: AGENTS.md and CLAUDE.md, read, digested for consent, capped into the prompt
        "Instructions", "build_instructions", "instructions_digest", "instructions_text", "read_project_instructions",
        # images in the prompt (issue 26 item 4): judged by their bytes, limited as the API limits them
        "MAX_IMAGE_BYTES", "MAX_IMAGES_PER_MESSAGE", "ImageRefused", "PromptImage", "check_prompt_images",
        "history_image_sizes", "image_block", "image_of_block", "read_prompt_image",
        "Action", "AgentDeskError", "AgentSession", "Allow", "AnthropicModelClient", "Approval",
        "ApprovalDecision", "ApprovalNotPending", "ApprovalScope", "AuditEntry", "BackgroundLogs",
        "Channel",
        "ConfigError", "DEFAULT_IMAGE", "DEFAULT_MAX_STEPS", "DEFAULT_MODEL", "DEFAULT_OUTPUT_LIMIT",
        "DEFAULT_READ_LIMIT", "DEFAULT_TIMEOUT_S", "DangerousCommandHook", "Deny", "Done", "Envelope",
        "ErrorEvent", "Event", "EventBus", "ExecResult", "Executor", "FileStat", "GrepMatch", "HookCall",
        "HookChain", "IllegalTransition", "ImageBlock", "MAX_TIMEOUT_S", "MISSING_KEY_HINT", "MemoryStore",
        "ModelClient", "ModelError", "ModelReply", "ModelRequest", "ModelUsage", "OffloadedPreHook", "Outcome",
        "OutputCallback", "OutputTruncationHook", "PathOutsideWorkspace", "PermissionDecided", "PermissionMode",
        "PermissionPolicy", "PermissionRequired", "PolicyDecision", "PostAction", "PostHookResult", "PreAction",
        "PreHookResult", "ProjectInfo", "Provenance", "RecordStore", "Redactor", "Redirect", "Risk", "Rule", "RuleSet",
        "RunContext", "SessionSetup", "Sandbox", "SandboxDescription", "SandboxError", "SandboxSurvivors",
        "SecretRedactionHook", "SessionInfo", "ProjectSettings",
        "ShellAnalysis", "SimpleCommand", "StateChanged", "StoreError", "StoredMessage", "TextBlock",
        "TextChunk", "ThinkingChunk", "TokenUsage", "Tool", "ToolCall", "ToolCallRecord", "ToolCallState",
        "ToolContext", "ToolEnd", "ToolError", "ToolExecuted", "ToolFacts", "ToolInput", "ToolInputError",
        "ToolNotFound", "ToolRegistry", "ToolResult", "ToolStart", "ToolUpdate", "TurnEnd", "TurnResult",
        "WORKSPACE", "analyse_command", "append_project_rule", "assess_risk", "builtin_hooks", "call_risk",
        "container_path", "control_dir", "control_reason", "glob_regex", "load_rules", "make_dirs_beneath", "new_id",
        "post_hook", "pre_hook", "project_rules_path", "read_beneath", "read_project_rules", "rules_from_texts",
        "rules_text_with", "suggest_rule", "summarize_input", "tool", "visible", "write_beneath",
        "Compacted", "CompactionSettings", "compaction_facts", "is_summary",
        # the tools offered and the person's hooks
        "HOOKS_FILE", "OfferedToolsHook", "TOOL_PROFILES", "ToolCustom", "UserHookSpec", "denied_outright",
        "hooks_digest", "offered_tools", "parse_user_hooks", "user_hook_chain", "user_hooks_from_toml",
        # agent-state (issue 16)
        "NO_PERSON", "PERSON_GROUP", "STATUS_CHANNELS", "AgentState", "AgentStateChanged",
        "AgentStatus", "Answer",
        "FileChanged", "PauseReason", "PendingQuestions", "Question", "QuestionAnswered", "QuestionAsked",
        "TodoChanged", "plan_mode_blocker", "status_from_events",
        "SessionNotice", "seal_calls",  # lifecycle (issue 14)
        "plural", "shown_risk", "skipped_after", "status_word",  # the record as it happened (issue 24)
        # templates and sub-agents
        "AgentTemplate", "BUILTIN_TEMPLATES", "DEFAULT_TEMPLATE", "NarrowedPolicy", "SubagentFinished",
        "SubagentLimits", "SubagentSetup", "SubagentStarted", "TASK_TOOL", "TemplateCatalog", "asked_by",
        "load_templates", "template_from_text", "Skill", "SkillCatalog", "load_skills",
        # what a repository ships, under consent (issue 23): templates, skills, the names they may have
        "PROJECT_SKILLS", "PROJECT_TEMPLATES", "DEFAULT_MAX_PROMPT_BYTES", "DEFAULT_MAX_SKILLS", "name_refusal",
        "price_for", "read_project_skills", "read_template_folder",
        "parse_breakpoint",  # where a person stops a session (the window's Breakpoints menu)
    ],
    "tools": [
        "BUILTIN_TOOLS", "BashKill", "BashLogs", "BashRun", "FsEdit", "FsGlob", "FsGrep", "FsMultiEdit",
        "FsRead", "FsWrite", "READ_HASHES_KEY", "TODOS_KEY", "TodoRead", "TodoWrite", "builtin_tools",
        "preview_diff",
        "AskUser", "ExitPlanMode",  # agent-state (issue 16)
        "SkillTool", "TaskRun", "skill_tools",
        "NotebookEdit",
        "GitCommit",  # the agent's commit, made by the desk on the host
    ],
    "sandbox": [
        "DockerSandbox", "ImageSpec", "ImageStatus", "LocalSandbox", "SandboxConfig", "build_base_image",
        "build_image", "connect", "ENGINE_HINT", "container_name", "create_sandbox", "image_name_for_tag", "images_dir",
        "list_images", "load_catalog", "remove_orphans", "resolve_image", "workspace_where",
        "BuildCancel",  # a build's Cancel
        "remove_crashed",  # the containers a crashed desk left
        "ProjectGit",  # the host's git, shut in (the git_commit tool's)
        "BaseFacts", "BasePlan", "base_plan", "plan_base",  # how the base image gets made (issue 25)
        # a project's own image (sandbox-check)
        "ProjectImageBuild", "ProjectImageSource", "build_project_image", "find_project_image", "folder_owner",
        "project_image_files",
        "project_image_digest", "project_image_tag", "refuse_loosening",
        "RUNSC_HINT", "engine_link",  # how the desk reaches its engine, gVisor (issue 25)
    ],
    "store": [
        "AuditQuery", "CSV_COLUMNS", "HeadSigner", "RecordRow", "SCHEMA_VERSION", "SqlStore", "StoreStats",
        "VerifyResult", "canonical_json", "verify_export", "write_records",
        "ChartData",  # the history's charts, aggregated by the database
    ],
    "mcp_client": [
        "PROJECT_CONFIG", "HubPlaces", "McpHub", "McpServerError", "McpTool", "ServerConfig", "ServerEntry",
        "header_secrets", "load_servers", "parse_servers", "read_project_servers",
    ],
    "runtime": [
        "Desk",  # the window's one link to the engine
        "tool_labels",  # the desk's catalogue of tool labels and cards (the window's lists, the report)
        # a session's files (and its conversation) put back (issue 26)
        "Rewind", "checkpoint_store", "plan_rewind", "plan_turn_rewind", "run_rewind",
        "read_image_file",  # an image file named for the prompt (--image-file, the attach button, a drop)
        # opening runtimes (one project for the CLI, one per project for the window) and their store
        "ProjectRuntime", "ProjectRuntimes", "build_runtime", "head_signer", "model_client_from_settings",
        "collect_between_turns", "settle_after_startup",  # the collector tuned once started (issue 29)
        # the loops' executor (the window's, and the CLI's run_bounded): a quit waits for a stuck job at most its grace
        "QuitBoundedExecutor", "run_bounded",
        "open_runtime", "open_store", "project_dir", "project_for_dir", "approval_expiry", "SqlStore",
        # consent: the rules file, the hooks file and each MCP server as the person approved them
        "CONSENT_KINDS", "Consent", "ConsentSubject", "approve", "consents", "load_agent_templates",
        "append_trusted_rule", "grant_hooks", "project_hooks_trust", "project_rules_trust",
        "trust_project_rules", "user_hook_specs", "write_project_rules",
        # the network list: the person's answers, the repository's list (the CLI's network verbs)
        "NETWORK_FILE", "answered_patterns", "revoke_answered",
        # which process has a session open; the calls a gone process left open
        "OPEN_IN", "mark_closed_here", "process_alive", "seal_abandoned", "this_process",
        "MODE_KEY", "stored_session_mode",  # the mode kept with a session
        "lease_dir", "remove_crashed_containers",  # the containers a crashed desk left
        "WorkspaceWatcher",
        "ReportScope", "build_report", "report_html",  # the auditor's report
        "Chart", "build_charts",  # the history's charts as SVG, for the window and the report
        "tools_with_plugins",  # the built-ins and the installed plugins' tools (doctor, the settings dialog)
        # what the front ends reach without a project's runtime (the tools, the audit log, Docker, MCP config)
        "audit_query", "builtin_tools", "parse_mcp_servers", "ping_docker", "project_mcp_servers",
        "verify_audit_export", "workspace_where", "write_records",
        "build_image", "build_project_image", "find_project_image", "list_images", "load_catalog",
        "project_image_digest", "project_image_tag", "resolve_image", "build_cancel", "project_image_files",
    ],
    "ui": [
        "AppController", "InstanceServer", "MainThreadGarbageCollector", "MainWindow", "apply_theme",
        "send_to_running", "write_pdf",
    ],
}


# A package's public rooms: their names reach the rest of the desk through the package's own face.
EXPORTED_BY_ROOMS: dict[str, list[str]] = {
    "core.policy": [
        "ACTION_RANK", "COMMAND_TOOLS", "PERSON_GROUP", "Action", "PermissionMode", "PermissionPolicy", "Policy",
        "PolicyDecision", "ToolFacts", "plan_mode_blocker", "suggest_rule",
        "Rule", "RuleSet", "command_matches", "path_matches", "load_rules", "project_rules_path",
        "read_project_rules", "rules_from_texts", "append_project_rule", "rules_text_with",
        "Redirect", "ShellAnalysis", "SimpleCommand", "analyse_command", "assess_command", "assess_risk",
        "container_path", "control_dir", "control_reason", "glob_regex",
    ],
    "sandbox.docker": ["DockerSandbox", "container_name", "folder_owner", "remove_crashed", "remove_orphans"],
    "sandbox.exec": ["ExecTransport"],
    "sandbox.sync": ["SyncedWorkspace", "remove_project_volumes"],
    "sandbox.images": [
        "ImageSpec", "ImageStatus", "build_base_image", "build_image", "image_name_for_tag", "images_dir",
        "list_images", "load_catalog", "resolve_image",
        "BaseFacts", "BasePlan", "base_plan", "plan_base",  # how the base image gets made (issue 25)
        "ProjectImageBuild", "ProjectImageSource", "build_project_image", "find_project_image",
        "project_image_digest", "project_image_tag", "refuse_loosening", "BuildCancel", "BuildCancelled",
        "project_image_files",
    ],
    "store.integrity": [
        "GENESIS", "VerifyResult", "canonical_json", "link_hash", "split_canonical",  # the chain
        "CANON_JCS", "CANON_LEGACY", "jcs", "jcs_data",  # its canonical forms: RFC 8785, and the one before
        "BLOB_MIN", "message_digests", "record_digests", "sha", "to_json",  # the rows' digests
        "ROWS_ACTOR", "ROWS_STATE", "BoundRows",  # events, sessions and projects bound by ROWS entries
        "HeadNotary", "HeadSigner", "db_identity",  # the head's signature, the desk's witness
        "ChainDigests", "latest_head", "message_entries", "trailer", "verify", "verify_export",  # checks, export
    ],
}


@pytest.mark.parametrize("package", [*PACKAGES, *EXPORTED_BY_ROOMS])
def test_exported_members_are_locked(package: str) -> None:
    module = importlib.import_module(f"desktop_app.{package}")
    assert sorted(module.__all__) == sorted({**EXPORTED, **EXPORTED_BY_ROOMS}[package])
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"desktop_app.{package}.__all__ names {name}, which it does not define"


def _imports_across_packages() -> list[tuple[str, str, str]]:
    """(importing file, package, name) for every `from <package> import name` made outside the package."""
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        own = rel[0] if len(rel) > 1 else None
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.level:
                base = list(("desktop_app", *rel[:-1]))[: len(rel) - node.level + 1]
                target = ".".join([*base, *node.module.split(".")])
            else:
                target = node.module
            parts = target.split(".")
            if parts[0] != "desktop_app" or len(parts) != 2 or parts[1] not in PACKAGES or parts[1] == own:
                continue
            found += [(str(path.relative_to(ROOT)), parts[1], alias.name) for alias in node.names]
    return found


def test_only_exported_names_cross_a_package_boundary() -> None:
    crossing = _imports_across_packages()
    assert crossing, "the scan must see the imports between packages"
    leaks = [(f, pkg, name) for f, pkg, name in crossing
             if name not in importlib.import_module(f"desktop_app.{pkg}").__all__]
    assert leaks == []


def test_every_exported_name_is_used_outside_its_package_or_documented() -> None:
    """An export nobody imports is a leak of an internal; the few kept for users and tests are listed."""
    used = {(pkg, name) for _, pkg, name in _imports_across_packages()}
    for package in PACKAGES:
        module = importlib.import_module(f"desktop_app.{package}")
        unused = sorted(n for n in module.__all__ if (package, n) not in used and n not in FOR_USERS.get(package, ()))
        assert unused == [], f"desktop_app.{package} exports names no other package imports: {unused}"


# Exported for people who build on the engine (their own tools, hooks, model clients, stores) and for
# maintenance, though no other package of the desk imports them today.
FOR_USERS: dict[str, tuple[str, ...]] = {
    "core": (
        "Action", "ApprovalNotPending", "DangerousCommandHook", "HookCall", "HookChain", "IllegalTransition",
        "MemoryStore", "ModelReply", "ModelRequest", "ModelUsage", "OffloadedPreHook", "OutputTruncationHook",
        "PolicyDecision",
        "PostAction", "PostHookResult", "PreAction", "PreHookResult", "RecordStore", "Redirect", "Rule",
        "RunContext", "SecretRedactionHook", "ShellAnalysis", "SimpleCommand", "ToolCall", "ToolInputError",
        "ToolNotFound", "TurnResult", "analyse_command", "assess_risk", "post_hook", "pre_hook", "tool",
        "REWIND_TOOL",  # the name of a rewind's record in the chain, for tools that read the audit
        # host-side file access beneath a project without following links (the control folder's creation)
        "make_dirs_beneath", "read_beneath",
        # when a session compacts (the runtime passes the defaults today)
        "CompactionSettings",
        # agent-state: the states and pause reasons as enums, the questions' queue, plan mode's judgement
        "AgentState", "PauseReason", "PendingQuestions", "plan_mode_blocker",
        # templates: the built-in ones and the parser, for people who write their own; the sub-agent's end
        "BUILTIN_TEMPLATES", "SubagentFinished", "template_from_text", "Skill",
        # the parts of a card, for a tool's own card_fields (issue 28 item 7)
        "default_summary", "input_fields", "outcome_fields",
    ),
    "tools": (
        "BUILTIN_TOOLS", "BashKill", "BashLogs", "BashRun", "FsEdit", "FsGlob", "FsGrep", "FsMultiEdit", "FsRead",
        "FsWrite", "READ_HASHES_KEY", "TODOS_KEY", "TodoRead", "TodoWrite",
        "AskUser", "ExitPlanMode",  # agent-state (issue 16)
        "SkillTool",  # the skill tool, for a registry of one's own
        "NotebookEdit",
    ),
    "sandbox": (
        "DockerSandbox", "ImageSpec", "ImageStatus", "LocalSandbox", "SandboxConfig", "build_base_image",
        "container_name", "image_name_for_tag", "images_dir", "remove_orphans",
        "ProjectImageBuild", "ProjectImageSource", "project_image_tag",  # a project's own image, for scripts
        "BaseFacts", "BasePlan", "plan_base",  # how the base image gets made, decided from facts (tests, scripts)
    ),
    "store": ("CSV_COLUMNS", "RecordRow", "SCHEMA_VERSION", "StoreStats", "VerifyResult", "canonical_json"),
    # for the window (the grant switch, the config's file name) and for people who build on the client
    "mcp_client": ("PROJECT_CONFIG", "McpServerError", "McpTool", "ServerConfig", "granted", "parse_servers"),
    # for scripts and tests that build a runtime their own way, or check what a gone process left open
    "runtime": ("CONSENT_KINDS", "ConsentSubject", "OPEN_IN", "ProjectRuntime", "WorkspaceWatcher",
                "append_trusted_rule", "approval_expiry", "build_runtime", "model_client_from_settings",
                "process_alive", "this_process",
                # what the Desk holds and does, for a desk of one's own (the window reaches them through it)
                "ProjectRuntimes", "mark_closed_here", "seal_abandoned",
                # what a crashed desk left (the Desk sweeps at start; a test or script can sweep itself)
                "lease_dir", "remove_crashed_containers",
                # a project's checkpoint store, for scripts that look into a workspace's checkpoints
                "checkpoint_store"),
}
