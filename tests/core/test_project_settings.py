"""ProjectSettings: each key of a project's settings declared once, read over the stored dict as it is."""

from dataclasses import fields

from desktop_app.core import ProjectInfo, ProjectSettings


def test_an_absent_key_reads_as_its_default_and_a_stored_one_as_stored() -> None:
    assert ProjectSettings.of(None) == ProjectSettings.of({}) == ProjectSettings()
    known = ProjectSettings.of({"tool_profile": "minimal", "disabled_tools": ["fs_write"], "memory": "bad"})
    assert (known.tool_profile, known.disabled_tools, known.approval_expiry_s) == ("minimal", ["fs_write"], None)
    assert known.memory == "bad"  # not checked here: the sandbox refuses it with its own message


def test_keys_it_does_not_declare_are_kept_and_the_stored_dict_is_left_alone() -> None:
    stored = {"hooks_grant_digest": "abc", "mcp_grants": {"git": "host"}, "network": True}
    project = ProjectInfo("prj_1", "p", "/tmp/p", settings=stored)
    known = ProjectSettings.of(project.settings)
    assert known.model_extra == {"hooks_grant_digest": "abc", "mcp_grants": {"git": "host"}}
    assert known.network is True
    assert project.settings == {"hooks_grant_digest": "abc", "mcp_grants": {"git": "host"}, "network": True}


def test_every_key_says_what_it_is_for() -> None:
    assert [name for name, f in ProjectSettings.model_fields.items() if not f.description] == []


def test_the_sandbox_defaults_are_the_sandbox_configs() -> None:
    from desktop_app.sandbox import SandboxConfig

    # kind is stored as "sandbox"; network_problem is what reading a bad network_allow found and lease_dir where
    # the desk keeps its leases: neither is a setting
    config_keys = {f.name for f in fields(SandboxConfig)} - {"kind", "image", "network_problem", "lease_dir"}
    declared = ProjectSettings().model_dump()
    assert config_keys <= set(declared)
    sandbox_keys = config_keys | {"sandbox", "workspace_ro"}
    assert SandboxConfig.from_settings({k: declared[k] for k in sandbox_keys}) == SandboxConfig.from_settings({})
