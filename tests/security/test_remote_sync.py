"""Attacks on the synced workspace (a remote engine's volume copied back to the host folder): what a
process in the sandbox makes must never reach outside the host folder, never land in .git or .agent-desk
under any spelling, never carry a link out, a FIFO or a setuid bit, and never write through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


def lexists(path: object) -> bool:
    """A link counts, whether or not it leads anywhere."""
    return os.path.lexists(path)  # type: ignore[arg-type]


async def _after(sb, command: str):
    res = await sb.exec(command)
    assert res.exit_code == 0, res.stderr
    return await sb.sync_workspace()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../..", "/workspace/../etc", "/workspace/.git/config",
                                    ".git/hooks", "sub/../.agent-desk", "/", ""])
async def test_no_link_out_of_the_workspace_or_into_a_control_folder_is_made(make_remote_sandbox, workspace,
                                                                             target):
    (workspace / ".git").mkdir()
    sb = await make_remote_sandbox()
    if not target:  # a chain: each link is judged on its own, so the one that leads out is refused
        report = await _after(sb, "mkdir sub && ln -s / sub/root && ln -s sub/root/etc chained")
        assert os.readlink(workspace / "chained") == "sub/root/etc" and not lexists(workspace / "sub/root")
        assert any(r.startswith("sub/root:") for r in report.refused)
        return
    report = await _after(sb, f"ln -s '{target}' evil")
    assert not lexists(workspace / "evil")
    assert [r.split(":")[0] for r in report.refused] == ["evil"]


@pytest.mark.parametrize("name", [".GIT/hooks/pre-commit", ".Agent-Desk/rules.toml", ".git./config",
                                  "GIT~1/config", ".git/config", ".agent-desk/rules.toml"])
async def test_nothing_comes_back_into_a_control_folder_under_any_spelling(make_remote_sandbox, workspace, name):
    sb = await make_remote_sandbox()  # no .git on the host: the sandbox may try to make one
    top = name.split("/")[0]
    res = await sb.exec(f"mkdir -p '{os.path.dirname(name)}' && echo evil > '{name}'")
    report = await sb.sync_workspace()
    if top == ".agent-desk":
        assert "Read-only file system" in res.stderr  # the control volume is mounted read-only
    else:
        assert res.exit_code == 0 and any(r.startswith(name) for r in report.refused)
    assert not (workspace / name).exists()
    assert not lexists(workspace / top) or top == ".agent-desk"
    # What the sandbox made there is taken away again: the host's state is put back into the volume.
    assert (await sb.exec(f"test -e '{name}'")).exit_code == 1


async def test_a_host_link_is_never_written_through(make_remote_sandbox, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "out")  # the person's own link, out of the project
    sb = await make_remote_sandbox()
    report = await _after(sb, "rm out && mkdir out && echo evil > out/planted && echo fine > ok.txt")
    assert os.listdir(outside) == []
    assert os.readlink(workspace / "out") == str(outside)
    assert (workspace / "ok.txt").read_text() == "fine\n"
    assert any(r.startswith("out") for r in report.refused)


async def test_a_folder_swapped_for_a_link_does_not_lead_a_push_out(make_remote_sandbox, workspace):
    (workspace / "d").mkdir()
    sb = await make_remote_sandbox()
    await _after(sb, "rmdir d && ln -s /tmp d")
    (workspace / "d" / "new.txt").write_text("from the host\n")
    report = await sb.sync_workspace()
    assert any(r.startswith("d/new.txt") for r in report.refused)
    assert (await sb.exec("ls /tmp")).stdout.find("new.txt") == -1
    assert (workspace / "d" / "new.txt").read_text() == "from the host\n"


async def test_no_setuid_bit_and_no_fifo_reach_the_host(make_remote_sandbox, workspace):
    sb = await make_remote_sandbox()
    report = await _after(sb, "printf x > suid && chmod 6755 suid && mkfifo pipe")
    assert stat.S_IMODE(os.stat(workspace / "suid").st_mode) == 0o755
    assert not lexists(workspace / "pipe")
    assert [r.split(":")[0] for r in report.refused] == ["pipe"]


async def test_a_name_the_host_would_read_as_a_path_is_kept_as_one_name(make_remote_sandbox, workspace: Path):
    sb = await make_remote_sandbox()
    await _after(sb, "touch ' ..' '...' 'a\\b' \"$(printf 'x\\ty')\" -- '-rf'")
    assert sorted(os.listdir(workspace)) == sorted([".agent-desk", " ..", "...", "a\\b", "x\ty", "-rf"])
    assert not any(lexists(workspace.parent / n) for n in ("...", "-rf"))
