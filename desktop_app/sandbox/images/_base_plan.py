"""How the base image (agent-desk/base:bookworm) gets made on this machine, for any user, root or not:

1. it is there already, or a tarball of an earlier build is cached: import it;
2. a registry answers: pull debian:bookworm-slim and tag it (no root, no Debian tools);
3. root with debootstrap: debootstrap a minimal Debian from the host's mirror (CI, air-gapped machines);
4. mmdebstrap --mode=unshare: the same without root, in a user namespace (Debian: mmdebstrap and uidmap,
   and a range of subordinate ids in /etc/subuid and /etc/subgid for the user);
5. else: what is missing, and the exact commands that fix it.

`plan_base` decides from facts alone (tested with every combination); `probe_base` gathers the facts of this
machine; sandbox_images/build_base.sh carries out the method it is given."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

PULL_IMAGE = "debian:bookworm-slim"
METHODS = ("present", "import", "pull", "debootstrap", "mmdebstrap", "none")


@dataclass(frozen=True, slots=True)
class BaseFacts:
    image_present: bool = False
    tarball_cached: bool = False
    registry_answers: bool = False
    pull_image: str = PULL_IMAGE  # "" when AGENT_DESK_BASE_PULL turns the pull off
    is_root: bool = False
    debootstrap: bool = False
    mmdebstrap: bool = False
    newuidmap: bool = False  # uidmap's setuid helpers
    subids: bool = False  # the user has ranges in /etc/subuid and /etc/subgid
    userns: bool = False  # an unprivileged user namespace can be made here
    user: str = "you"


@dataclass(frozen=True, slots=True)
class BasePlan:
    method: str  # one of METHODS
    detail: str  # in plain words, for doctor and the build's progress
    missing: tuple[str, ...] = ()  # what the rootless path lacks
    commands: tuple[str, ...] = ()  # what to run when method is "none"


def plan_base(f: BaseFacts, image: str = "agent-desk/base:bookworm") -> BasePlan:
    """The method that makes `image` with these facts, or what to do when none can."""
    if f.image_present:
        return BasePlan("present", f"{image} is on the engine")
    if f.tarball_cached:
        return BasePlan("import", f"{image} is imported from the cached tarball of an earlier build")
    if f.pull_image and f.registry_answers:
        return BasePlan("pull", f"{image} is pulled from a registry ({f.pull_image})")
    if f.is_root and f.debootstrap:
        return BasePlan("debootstrap", f"{image} is made with debootstrap from the Debian mirror (as root)")
    missing = _rootless_missing(f)
    if f.mmdebstrap and not missing:
        return BasePlan("mmdebstrap", f"{image} is made without root: mmdebstrap --mode=unshare from the mirror")
    return BasePlan("none", f"{image} cannot be made here: " + _why_none(f, missing), tuple(missing),
                    _commands(f, missing))


def _rootless_missing(f: BaseFacts) -> list[str]:
    missing = [] if f.mmdebstrap else ["mmdebstrap"]
    if not f.newuidmap:
        missing.append("uidmap (newuidmap)")
    if not f.subids:
        missing.append(f"subordinate ids for {f.user} (/etc/subuid, /etc/subgid)")
    if not f.userns:
        missing.append("unprivileged user namespaces")
    return missing


def _why_none(f: BaseFacts, missing: list[str]) -> str:
    registry = f"no registry answers for {f.pull_image}" if f.pull_image else "pulling is off (AGENT_DESK_BASE_PULL)"
    return f"{registry}, and the rootless build lacks {', '.join(missing)}"


def _commands(f: BaseFacts, missing: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    packages = [p for p, key in (("mmdebstrap", "mmdebstrap"), ("uidmap", "uidmap (newuidmap)")) if key in missing]
    if packages:
        out.append(f"sudo apt-get install {' '.join(packages)}")
    if any(m.startswith("subordinate ids") for m in missing):
        out.append(f"sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {f.user}")
    if "unprivileged user namespaces" in missing:
        out.append("sudo sysctl -w kernel.unprivileged_userns_clone=1  # or, in a container, run it with "
                   "--security-opt seccomp=unconfined")
    out.append("agent-desk images build minimal")
    out.append(f"or, where a registry answers: docker pull {PULL_IMAGE} && docker tag {PULL_IMAGE} "
               "agent-desk/base:bookworm")
    return tuple(out)


def _has_subids(user: str, uid: int) -> bool:
    def listed(path: str) -> bool:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return False
        return any(line.split(":", 1)[0] in (user, str(uid)) for line in lines if ":" in line)

    return listed("/etc/subuid") and listed("/etc/subgid")


def _userns_works() -> bool:
    """Whether this user may make a user namespace (unshare(1) tries one; root always may)."""
    if shutil.which("unshare") is None:
        return False
    try:
        proc = subprocess.run(["unshare", "--user", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _registry_answers(client: docker.DockerClient | None, ref: str) -> bool:
    """Whether the engine reaches the registry of `ref` (a manifest look-up: nothing is downloaded)."""
    if client is None or not ref:
        return False
    try:
        client.api.inspect_distribution(ref)
    except Exception:  # no route, no DNS, refused, unauthorised: no registry for us
        return False
    return True


def probe_base(client: docker.DockerClient | None, image: str, tarball: Path | None) -> BaseFacts:
    """The facts of this machine and user (`client`: the engine, None when none answers)."""
    import docker.errors

    present = False
    if client is not None:
        try:
            client.images.get(image)
            present = True
        except docker.errors.ImageNotFound:
            present = False
    pull = os.environ.get("AGENT_DESK_BASE_PULL", PULL_IMAGE)
    uid = os.getuid()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(uid)
    return BaseFacts(
        image_present=present,
        tarball_cached=bool(tarball and tarball.is_file() and tarball.stat().st_size > 0),
        registry_answers=not present and _registry_answers(client, pull),
        pull_image=pull,
        is_root=uid == 0,
        debootstrap=shutil.which("debootstrap") is not None,
        mmdebstrap=shutil.which("mmdebstrap") is not None,
        newuidmap=shutil.which("newuidmap") is not None,
        subids=uid == 0 or _has_subids(user, uid),
        userns=_userns_works(),
        user=user,
    )


def tarball_of(script: Path) -> Path | None:
    """Where `script` (build_base.sh) caches its tarball for this user (it says so with --where)."""
    try:
        proc = subprocess.run(["bash", str(script), "--where"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def plan_for(script: Path, image: str, client: docker.DockerClient | None) -> BasePlan:
    """The plan for this machine and user: the facts probed, then `plan_base`."""
    return plan_base(probe_base(client, image, tarball_of(script)), image)
