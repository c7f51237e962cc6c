"""The base image for a user who is not root (issue 25, item 4): which way it gets made (plan_base, every branch
from facts), what this machine's facts are for a real non-root user, and the rootless build itself:
build_base.sh run as that user makes the Debian tree with mmdebstrap --mode=unshare, and the tree runs as an
image. The pull branch (a registry that answers) cannot run here (no registry is reachable): its decision is
tested from facts, its failure for real."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_app.doctor import base_image_check
from desktop_app.sandbox import BaseFacts, plan_base
from tests.conftest import in_ci

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "sandbox_images" / "build_base.sh"
USER = "agent-desk-rootless"  # made by .ci/rootless-deps.sh (`make rootless-deps`)
ROOTLESS = BaseFacts(mmdebstrap=True, newuidmap=True, subids=True, userns=True, user="ada")


@pytest.mark.parametrize(
    ("facts", "method"),
    [
        (BaseFacts(image_present=True), "present"),
        (BaseFacts(tarball_cached=True, registry_answers=True), "import"),
        (BaseFacts(registry_answers=True, is_root=True, debootstrap=True), "pull"),
        (BaseFacts(registry_answers=True, pull_image="", is_root=True, debootstrap=True), "debootstrap"),
        (BaseFacts(is_root=True, debootstrap=True, mmdebstrap=True), "debootstrap"),
        (ROOTLESS, "mmdebstrap"),
        (BaseFacts(is_root=True, mmdebstrap=True, newuidmap=True, subids=True, userns=True), "mmdebstrap"),
        (BaseFacts(debootstrap=True, user="ada"), "none"),  # debootstrap without root is no way
    ],
)
def test_the_plan_takes_the_first_way_that_works(facts: BaseFacts, method: str) -> None:
    assert plan_base(facts).method == method


@pytest.mark.parametrize(
    ("lacking", "command"),
    [
        ({"mmdebstrap": False}, "sudo apt-get install mmdebstrap"),
        ({"newuidmap": False}, "sudo apt-get install uidmap"),
        ({"mmdebstrap": False, "newuidmap": False}, "sudo apt-get install mmdebstrap uidmap"),
        ({"subids": False}, "sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 ada"),
        ({"userns": False}, "sudo sysctl -w kernel.unprivileged_userns_clone=1"),
    ],
)
def test_no_way_says_what_is_missing_and_the_commands(lacking: dict[str, bool], command: str) -> None:
    facts = BaseFacts(**{**{f: getattr(ROOTLESS, f) for f in ROOTLESS.__slots__}, **lacking})
    plan = plan_base(facts)
    assert plan.method == "none" and plan.missing
    assert "no registry answers for debian:bookworm-slim" in plan.detail
    assert any(c.startswith(command) for c in plan.commands), plan.commands
    assert plan.commands[-2] == "agent-desk images build minimal"
    assert "docker pull debian:bookworm-slim" in plan.commands[-1]


def _rootless_user() -> pwd.struct_passwd:
    why = ""
    if os.getuid() != 0:
        why = "the test switches to a non-root user: it runs as root (as CI does)"
    else:
        try:
            return pwd.getpwnam(USER)
        except KeyError:
            why = f"the user {USER} is missing (.ci/rootless-deps.sh makes it)"
    if in_ci():
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


@pytest.fixture
def user_home() -> Iterator[tuple[pwd.struct_passwd, Path]]:
    user = _rootless_user()
    home = Path(tempfile.mkdtemp(prefix="agent-desk-rootless-"))
    os.chown(home, user.pw_uid, user.pw_gid)
    try:
        yield user, home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _as_user(user: pwd.struct_passwd, home: Path, argv: list[str], path: str | None = None,
             timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "AGENT_DESK_CACHE": str(home / "cache"), "LANG": "C.UTF-8"}
    setpriv = [shutil.which("setpriv") or "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
               "--clear-groups"]
    return subprocess.run([*setpriv, *argv], env=env, cwd=home, capture_output=True, text=True, timeout=timeout)


_PROBE = ("import sys; from pathlib import Path; from desktop_app.sandbox.images._base_plan import "
          "plan_base, probe_base, tarball_of; t = tarball_of(Path(sys.argv[1])); "
          "p = plan_base(probe_base(None, 'agent-desk/base:bookworm', t)); "
          "print(p.method); print(t); print(*p.commands, sep='\\n')")


def test_a_non_root_user_gets_the_rootless_way_and_without_mmdebstrap_the_commands(user_home) -> None:
    user, home = user_home
    found = _as_user(user, home, [sys.executable, "-c", _PROBE, str(SCRIPT)], timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    method, tarball, *_ = found.stdout.splitlines()
    assert method == "mmdebstrap", found.stdout  # no registry answers here; mmdebstrap, uidmap, subuid, userns do
    assert tarball == str(home / "cache" / Path(tarball).name)  # the user's own cache, not /var/cache
    # The same user on a machine without mmdebstrap: a PATH of the real tools less that one.
    bin_dir = home / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "unshare", "newuidmap", "dpkg", "uname", "id", "cat", "awk", "grep", "head"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    found = _as_user(user, home, [sys.executable, "-c", _PROBE, str(SCRIPT)], path=str(bin_dir), timeout=120)
    method, _tarball, *commands = found.stdout.splitlines()
    assert method == "none" and "sudo apt-get install mmdebstrap" in commands, found.stdout + found.stderr


@pytest.mark.docker
def test_build_base_without_root_makes_a_debian_that_runs(user_home, docker_client) -> None:
    """build_base.sh as a non-root user (mmdebstrap --mode=unshare), its tarball imported and run."""
    user, home = user_home
    made = _as_user(user, home, ["bash", str(SCRIPT), "--method", "mmdebstrap", "--tarball-only"])
    assert made.returncode == 0, made.stderr[-3000:]
    tarball = Path(_as_user(user, home, ["bash", str(SCRIPT), "--where"]).stdout.strip())
    assert tarball.is_file() and tarball.stat().st_uid == user.pw_uid
    tag = f"agent-desk/rootless-test:{os.getpid()}"
    # The import as the script does it for that user (who would be in the docker group): the cached tarball.
    imported = subprocess.run(["bash", str(SCRIPT)], env={**os.environ, "AGENT_DESK_CACHE": str(home / "cache"),
                              "AGENT_DESK_BASE_IMAGE": tag, "AGENT_DESK_BASE_PULL": ""},
                              capture_output=True, text=True, timeout=600)
    assert imported.returncode == 0 and "importing" in imported.stderr, imported.stderr[-2000:]
    try:
        out = docker_client.containers.run(
            tag, ["sh", "-c", "cat /etc/debian_version; stat -c %u /usr/bin/apt-get /root; "
                              "cat /etc/apt/sources.list"], remove=True, network_mode="none").decode()
        version, apt_owner, root_owner, *sources = out.splitlines()
        assert version.startswith("12"), out  # bookworm
        assert apt_owner == root_owner == "0", out  # owned by root inside, though made by a user outside
        assert any(" bookworm main" in s for s in sources) and any("bookworm-updates" in s for s in sources), out
    finally:
        docker_client.images.remove(tag, force=True)


def test_a_pull_from_no_registry_fails_and_says_so(tmp_path: Path) -> None:
    home = tmp_path
    env_pull = {"AGENT_DESK_BASE_PULL": "localhost:1/none:x"}
    proc = subprocess.run(["bash", str(SCRIPT), "--method", "pull"], env={**os.environ, **env_pull,
                          "AGENT_DESK_CACHE": str(home / "cache"),
                          "AGENT_DESK_BASE_IMAGE": "agent-desk/base-pull-test:none"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "pulling localhost:1/none:x failed" in proc.stderr, proc.stderr


def test_doctor_says_how_the_base_image_is_made(docker_client) -> None:
    check = base_image_check(docker_client)
    assert check.name == "Base image" and check.status in ("ok", "warn", "fail")
    assert "agent-desk/base:bookworm" in check.detail
    if check.status != "ok":
        assert "agent-desk images build minimal" in check.fix
