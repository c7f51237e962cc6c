"""The runtime: one project's tools, policy, hooks, executor, sandbox and model client, built by one recipe
for the CLI (`open_runtime`, one project) and the window (`ProjectRuntimes`, a runtime per project)."""

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
from ._liveness import OPEN_IN, mark_closed_here, process_alive, seal_abandoned, this_process
from ._project_settings import approval_expiry
from ._recipe import ProjectRuntime, build_runtime, model_client_from_settings
from ._watcher import WorkspaceWatcher

__all__ = [
    "CONSENT_KINDS",
    "OPEN_IN",
    "Consent",
    "ConsentSubject",
    "Desk",
    "ProjectRuntime",
    "ProjectRuntimes",
    "WorkspaceWatcher",
    "append_trusted_rule",
    "approval_expiry",
    "approve",
    "build_runtime",
    "consents",
    "grant_hooks",
    "head_signer",
    "mark_closed_here",
    "model_client_from_settings",
    "open_runtime",
    "open_store",
    "process_alive",
    "project_dir",
    "project_for_dir",
    "project_hooks_trust",
    "project_rules_trust",
    "seal_abandoned",
    "this_process",
    "trust_project_rules",
    "user_hook_specs",
    "write_project_rules",
]
