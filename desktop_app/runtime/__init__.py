"""The runtime: one project's tools, policy, hooks, executor, sandbox and model client, built by one recipe
for the CLI (`open_runtime`, one project) and the window (`ProjectRuntimes`, a runtime per project)."""

from ._desk import ProjectRuntimes, head_signer, open_runtime, open_store, project_dir, project_for_dir
from ._liveness import OPEN_IN, mark_closed_here, process_alive, seal_abandoned, this_process
from ._project_settings import approval_expiry
from ._recipe import ProjectRuntime, build_runtime, model_client_from_settings
from ._trust import (
    HooksTrust,
    RulesTrust,
    append_trusted_rule,
    grant_hooks,
    project_hooks_trust,
    project_rules_trust,
    trust_project_rules,
    user_hook_specs,
    write_project_rules,
)
from ._watcher import WorkspaceWatcher

__all__ = [
    "OPEN_IN",
    "HooksTrust",
    "ProjectRuntime",
    "ProjectRuntimes",
    "RulesTrust",
    "WorkspaceWatcher",
    "append_trusted_rule",
    "approval_expiry",
    "build_runtime",
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
