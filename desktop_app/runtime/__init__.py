"""The runtime: one project's tools, policy, hooks, executor, sandbox and model client, built by one recipe
for the CLI (`open_runtime`, one project) and the window (`Desk`, its one link to the engine: a runtime per
project on one store and bus). The front ends reach the engine through this face only."""

from typing import TYPE_CHECKING, Any

from ._charts import Chart, build_charts
from ._consent import (
    CONSENT_KINDS,
    Consent,
    ConsentSubject,
    append_trusted_rule,
    approve,
    consents,
    grant_hooks,
    project_hooks_trust,
    project_rules_trust,
    trust_project_rules,
    user_hook_specs,
    write_project_rules,
)
from ._desk import Desk, ProjectRuntimes, head_signer, open_runtime, open_store, project_dir, project_for_dir
from ._front import (
    audit_query,
    build_cancel,
    build_image,
    build_project_image,
    builtin_tools,
    find_project_image,
    front_end_type,
    list_images,
    load_catalog,
    parse_mcp_servers,
    ping_docker,
    project_image_digest,
    project_image_files,
    project_image_tag,
    project_mcp_servers,
    resolve_image,
    verify_audit_export,
    workspace_where,
    write_records,
)
from ._gc import collect_between_turns, settle_after_startup
from ._liveness import OPEN_IN, mark_closed_here, process_alive, seal_abandoned, this_process
from ._network import answered_patterns, revoke_answered
from ._network_repo import NETWORK_FILE
from ._orphans import lease_dir, remove_crashed_containers
from ._project_settings import approval_expiry
from ._prompt_images import read_image_file
from ._quit_executor import QuitBoundedExecutor, run_bounded
from ._recipe import (
    ProjectRuntime,
    build_runtime,
    load_agent_templates,
    model_client_from_settings,
    tools_with_plugins,
)
from ._report import ReportScope, build_report
from ._report_html import report_html
from ._rewind import Rewind, checkpoint_store
from ._rewind import plan as plan_rewind
from ._rewind import plan_turn as plan_turn_rewind
from ._rewind import run as run_rewind
from ._session_mode import MODE_KEY, stored_session_mode
from ._tool_labels import tool_labels
from ._watcher import WorkspaceWatcher

if TYPE_CHECKING:  # the store's type, for a front end's annotations (the store is imported when used)
    from ._front import SqlStore as SqlStore


def __getattr__(name: str) -> Any:
    return front_end_type(name)  # SqlStore, imported when first asked for (the store takes a second to import)


__all__ = [
    "CONSENT_KINDS",
    "MODE_KEY",
    "NETWORK_FILE",
    "OPEN_IN",
    "Chart",
    "Consent",
    "ConsentSubject",
    "Desk",
    "ProjectRuntime",
    "ProjectRuntimes",
    "QuitBoundedExecutor",
    "ReportScope",
    "Rewind",
    "SqlStore",
    "WorkspaceWatcher",
    "answered_patterns",
    "append_trusted_rule",
    "approval_expiry",
    "approve",
    "audit_query",
    "build_cancel",
    "build_charts",
    "build_image",
    "build_project_image",
    "build_report",
    "build_runtime",
    "builtin_tools",
    "checkpoint_store",
    "collect_between_turns",
    "consents",
    "find_project_image",
    "grant_hooks",
    "head_signer",
    "lease_dir",
    "list_images",
    "load_agent_templates",
    "load_catalog",
    "mark_closed_here",
    "model_client_from_settings",
    "open_runtime",
    "open_store",
    "parse_mcp_servers",
    "ping_docker",
    "plan_rewind",
    "plan_turn_rewind",
    "process_alive",
    "project_dir",
    "project_for_dir",
    "project_hooks_trust",
    "project_image_digest",
    "project_image_files",
    "project_image_tag",
    "project_mcp_servers",
    "project_rules_trust",
    "read_image_file",
    "remove_crashed_containers",
    "report_html",
    "resolve_image",
    "revoke_answered",
    "run_bounded",
    "run_rewind",
    "seal_abandoned",
    "settle_after_startup",
    "stored_session_mode",
    "this_process",
    "tool_labels",
    "tools_with_plugins",
    "trust_project_rules",
    "user_hook_specs",
    "verify_audit_export",
    "workspace_where",
    "write_project_rules",
    "write_records",
]
