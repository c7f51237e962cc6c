"""The runtime: one project's tools, policy, hooks, executor, sandbox and model client, built by one recipe
for the CLI (`open_runtime`, one project) and the window (`ProjectRuntimes`, a runtime per project)."""

from typing import TYPE_CHECKING, Any

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
from ._front_ends import (
    audit_query,
    build_image,
    build_project_image,
    front_end_type,
    grant_mcp_server,
    image_catalog,
    image_statuses,
    project_mcp_servers,
    resolve_image,
    verify_audit_export,
)
from ._liveness import OPEN_IN, mark_closed_here, process_alive, seal_abandoned, this_process
from ._project_settings import approval_expiry
from ._recipe import ProjectRuntime, build_runtime, model_client_from_settings
from ._watcher import WorkspaceWatcher

if TYPE_CHECKING:  # the store's type, for a front end's annotations (the store is imported when used)
    from ._front_ends import SqlStore as SqlStore


def __getattr__(name: str) -> Any:
    return front_end_type(name)  # SqlStore, imported when first asked for (the store takes a second to import)


__all__ = [
    "CONSENT_KINDS",
    "OPEN_IN",
    "Consent",
    "ConsentSubject",
    "Desk",
    "ProjectRuntime",
    "ProjectRuntimes",
    "SqlStore",
    "WorkspaceWatcher",
    "append_trusted_rule",
    "approval_expiry",
    "approve",
    "audit_query",
    "build_image",
    "build_project_image",
    "build_runtime",
    "consents",
    "grant_hooks",
    "grant_mcp_server",
    "head_signer",
    "image_catalog",
    "image_statuses",
    "mark_closed_here",
    "model_client_from_settings",
    "open_runtime",
    "open_store",
    "process_alive",
    "project_dir",
    "project_for_dir",
    "project_hooks_trust",
    "project_mcp_servers",
    "project_rules_trust",
    "resolve_image",
    "seal_abandoned",
    "this_process",
    "trust_project_rules",
    "user_hook_specs",
    "verify_audit_export",
    "write_project_rules",
]
