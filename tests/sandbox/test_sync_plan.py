"""The synced workspace's decisions without an engine: which way each path goes, which links may come back,
and which engine addresses mean a synced workspace (the one place that says it)."""

from __future__ import annotations

import pytest

from desktop_app.core import ConfigError
from desktop_app.sandbox import SandboxConfig
from desktop_app.sandbox._config import engine_address, syncs_workspace
from desktop_app.sandbox.sync._plan import link_refusal, plan, pull_refusal

A, B, C = ["f", 0o644, 1, "a"], ["f", 0o644, 1, "b"], ["f", 0o644, 1, "c"]


def test_each_path_goes_the_way_only_one_side_changed_and_both_sides_is_a_conflict() -> None:
    base = {"same": A, "host": A, "vol": A, "both": A, "both-same": A, "gone-host": A, "gone-vol": A}
    host = {"same": A, "host": B, "vol": A, "both": B, "both-same": C, "gone-vol": A, "new-host": A}
    vol = {"same": A, "host": A, "vol": B, "both": C, "both-same": C, "gone-host": A, "new-vol": A}
    p = plan(host, vol, base, base)
    assert sorted(p.push) == ["gone-host", "host", "new-host"]
    assert sorted(p.pull) == ["gone-vol", "new-vol", "vol"]
    assert p.conflicts == ["both"] and p.equal == ["both-same"]


def test_a_mode_change_is_a_change_and_a_folder_is_a_folder_whatever_its_mode() -> None:
    x = ["f", 0o755, 1, "a"]
    assert plan({"f": x}, {"f": A}, {"f": A}, {"f": A}).push == ["f"]
    assert plan({"d": ["d", 0o700, 0, ""]}, {"d": ["d", 0o755, 0, ""]}, {}, {}).equal == ["d"]


@pytest.mark.parametrize(("path", "target", "made"), [
    ("a/link", "../b", "../b"), ("link", "/workspace/src/x", "src/x"), ("a/b/link", "/workspace/a", ".."),
    ("link", "/etc/passwd", ""), ("a/link", "../../x", ""), ("link", ".git/config", ""),
    ("link", "/workspace/.AGENT-DESK", ""), ("link", "", ""), ("link", "/workspace", "."),
])
def test_a_link_comes_back_only_when_it_stays_inside_and_out_of_the_control_folders(path, target, made) -> None:
    got, why = link_refusal(path, target)
    assert got == made and bool(why) == (not made)


def test_control_folders_and_fifos_are_never_pulled() -> None:
    assert "read-only" in pull_refusal(".git/hooks/pre-commit", A)
    assert "read-only" in pull_refusal(".GIT", None)
    assert "not a file" in pull_refusal("pipe", ["o", 0o644, 0, ""])
    assert pull_refusal("src/a.py", A) == ""


@pytest.mark.parametrize(("setting", "address", "synced"), [
    ("auto", "unix:///var/run/docker.sock", False), ("auto", "tcp://build:2376", True),
    ("auto", "ssh://me@build", True), ("synced", "unix:///var/run/docker.sock", True),
    ("bind", "tcp://127.0.0.1:2375", False),
])
def test_the_workspace_is_synced_when_the_engine_cannot_see_the_folder(setting, address, synced) -> None:
    assert syncs_workspace(SandboxConfig(workspace=setting), address) is synced


def test_the_engine_address_comes_from_docker_host_or_the_client(monkeypatch) -> None:
    class Api:
        base_url = "http://10.0.0.5:2375"

    class Client:
        api = Api()

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert engine_address(Client()) == "tcp://10.0.0.5:2375"
    assert engine_address(None) == "unix:///var/run/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", "ssh://me@build")
    assert engine_address(Client()) == "ssh://me@build"


def test_bad_workspace_settings_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="unknown workspace setting"):
        SandboxConfig.from_settings({"workspace": "nfs"})
    # the retired git_writable is the git_commit tool's now (the desk commits on the host): no sandbox setting
    assert SandboxConfig.from_settings({"workspace": "synced", "git_writable": True}).workspace == "synced"
    assert SandboxConfig.from_settings({"workspace": "synced"}).workspace == "synced"
