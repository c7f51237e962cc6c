"""The packages as a user gets them: the .deb installed with dpkg in a clean Debian container (the debootstrap
base plus only what the .deb declares) runs every CLI subcommand and renders the window; the wheel installed
in a fresh venv outside the repository lists and builds the catalog's images."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import no_engine
from tests.packaging.dist import REPO, built_dist, deb_field

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(2400)]
BASE = "agent-desk/base:bookworm"
SOCKET = "/var/run/docker.sock"


def _host_cli_accepts(argv: list[str], tmp_path: Path) -> bool:
    """Whether this checkout's CLI takes `argv` (the cli part brings --version and options after the subcommand)."""
    code = f"import sys; from desktop_app.cli import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          timeout=120).returncode == 0


def _deps_image(client, deb: Path) -> str:
    """The base with the .deb's Depends installed, cached by their list: a new Depends builds a new image."""
    depends = deb_field(deb, "Depends")
    tag = f"agent-desk/pkgtest-deps:{hashlib.sha256(depends.encode()).hexdigest()[:12]}"
    try:
        client.images.get(tag)
        return tag
    except Exception:
        pass
    packages = " ".join(d.strip().split()[0] for d in depends.split(","))
    dockerfile = (f"FROM {BASE}\nRUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                  f"--no-install-recommends {packages} && rm -rf /var/lib/apt/lists/*\n")
    for chunk in client.api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True,
                                  pull=False, decode=True):
        assert "error" not in chunk, chunk["error"]
    return tag


def _script(deb_name: str, version_argv: str, audit_argv: str) -> str:
    return f"""set -u
run() {{ n=$1; shift; "$@" >/out/$n.out 2>/out/$n.err; echo $? >/out/$n.rc; }}
run dpkg dpkg -i /dist/{deb_name}
cd /tmp
run version agent-desk {version_argv}
run images agent-desk images list
run audit agent-desk {audit_argv}
QT_QPA_PLATFORM=offscreen run shot agent-desk --screenshot /out/shot.png
QT_QPA_PLATFORM=xcb DISPLAY=:99 run xcb agent-desk --screenshot /out/xcb.png
export LD_LIBRARY_PATH=/usr/lib/agent-desk/_internal
find /usr/lib/agent-desk -type f \\( -name '*.so*' -o -name agent-desk \\) | while read -r f; do
  ldd "$f" 2>/dev/null | grep 'not found' | sed "s|^|$f: |"; done >/out/ldd.out
readlink -f /usr/bin/agent-desk >/out/link.out
ls /usr/share/applications/agent-desk.desktop /usr/share/icons/hicolor/scalable/apps/agent-desk.svg >/out/files.out
"""


def _run_in_clean_container(client, image: str, deb: Path, script: str, out: Path) -> None:
    (out / "in.sh").write_text(script)
    volumes = {str(deb.parent): {"bind": "/dist", "mode": "ro"}, str(out): {"bind": "/out", "mode": "rw"}}
    if os.environ.get("DOCKER_HOST", f"unix://{SOCKET}") == f"unix://{SOCKET}":
        volumes[SOCKET] = {"bind": SOCKET, "mode": "rw"}  # `images list` asks the host's engine
    box = client.containers.run(image, ["bash", "/out/in.sh"], volumes=volumes, detach=True, network_mode="none")
    try:
        result = box.wait(timeout=900)
        assert result["StatusCode"] == 0, box.logs().decode(errors="replace")[-3000:]
    finally:
        box.remove(force=True)


def _rc(out: Path, name: str) -> tuple[int, str]:
    text = (out / f"{name}.out").read_text(errors="replace") + (out / f"{name}.err").read_text(errors="replace")
    return int((out / f"{name}.rc").read_text()), text


def assert_real_window(png: Path) -> None:
    """A picture of the window: window-sized, and not one flat colour (text, frames, a banner)."""
    from PySide6.QtGui import QImage

    img = QImage(str(png))
    assert not img.isNull() and img.width() >= 800 and img.height() >= 500, (img.width(), img.height())
    colours = {img.pixel(x, y) for x in range(0, img.width(), 7) for y in range(0, img.height(), 7)}
    assert len(colours) > 20, f"{len(colours)} colours: not a rendered window"


def test_deb_in_a_clean_container(docker_client, private_tmp: Path) -> None:
    tmp_path = private_tmp
    dist = built_dist()
    deb = dist["deb"]
    try:
        docker_client.images.get(BASE)
    except Exception:
        no_engine(f"{BASE} is missing (sandbox_images/engine.sh builds it)")
    assert "docker.io" in deb_field(deb, "Recommends") and deb_field(deb, "Depends").startswith("libc6 (>= ")
    has_version = _host_cli_accepts(["--version"], tmp_path)
    audit_after = _host_cli_accepts(["audit", "list", "--db", f"sqlite:///{tmp_path / 'probe.db'}"], tmp_path)
    audit_argv = "audit list --db sqlite:///audit.db" if audit_after else "audit --db sqlite:///audit.db list"
    out = tmp_path / "out"
    out.mkdir()
    script = _script(deb.name, "--version" if has_version else "--help", audit_argv)
    _run_in_clean_container(docker_client, _deps_image(docker_client, deb), deb, script, out)
    for step in ("dpkg", "version", "images", "shot"):
        rc, text = _rc(out, step)
        assert rc == 0, f"{step}: exit {rc}\n{text[-2000:]}"
    rc, text = _rc(out, "audit")  # a reader refuses a database that is not there, naming it (never makes it)
    assert rc == 2 and "There is no audit database at /tmp/audit.db" in text, f"audit: exit {rc}\n{text[-2000:]}"
    assert "Traceback" not in "".join(_rc(out, s)[1] for s in ("version", "images", "audit", "shot"))
    assert "minimal" in _rc(out, "images")[1] and "agent-desk/minimal:latest" in _rc(out, "images")[1]
    if has_version:
        assert dist["wheel"].name.split("-")[1] in _rc(out, "version")[1]
    assert_real_window(out / "shot.png")
    # The X11 window: the xcb plugin loads with only the declared libraries, and fails only for want of a display.
    xcb = _rc(out, "xcb")[1]
    assert "could not connect to display" in xcb and "cannot open shared object" not in xcb, xcb[-2000:]
    assert (out / "ldd.out").read_text() == "", "libraries the .deb does not declare:\n" + (out / "ldd.out").read_text()
    assert (out / "link.out").read_text().strip() == "/usr/lib/agent-desk/agent-desk"
    assert len((out / "files.out").read_text().split()) == 2


def _fresh_venv(where: Path, wheel: Path, env: dict[str, str]) -> Path:
    venv.create(where, with_pip=True)
    py = where / "bin" / "python"
    # `env` has no PYTHONPATH: a checkout's agent_desk.egg-info on it makes pip think the wheel is installed.
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=1200, cwd=where, env=env)
    return where / "bin"


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    """A folder of our own: /tmp/pytest-of-USER is pruned by the other pytest runs of a shared machine."""
    with tempfile.TemporaryDirectory(prefix="agent-desk-pkgtest-") as d:
        yield Path(d)


def test_wheel_in_a_fresh_venv(docker_client, private_tmp: Path) -> None:
    wheel = built_dist()["wheel"]
    home = private_tmp  # outside the repository: no checkout to fall back on
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENT_DESK_IMAGES_DIR")}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    bin_dir = _fresh_venv(home / "venv", wheel, env)

    def cli(*argv: str, timeout: int = 600) -> str:
        proc = subprocess.run([str(bin_dir / "agent-desk"), *argv], cwd=home, env=env, capture_output=True,
                              text=True, timeout=timeout)
        assert proc.returncode == 0, f"agent-desk {' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        return proc.stdout + proc.stderr

    where = subprocess.run([str(bin_dir / "python"), "-c", "from desktop_app.sandbox import images_dir; "
                            "print(images_dir())"], cwd=home, env=env, capture_output=True, text=True)
    assert where.stdout.strip().startswith(str(home / "venv")), where.stdout + where.stderr  # the wheel's own
    # A stray top-level sandbox_images/ (another distribution's data) beside the package is not the catalog.
    site = next((home / "venv" / "lib").glob("python3*/site-packages"))
    (site / "sandbox_images").mkdir()
    (site / "sandbox_images" / "images.toml").write_text('[images.decoy]\ndockerfile = "x"\ntag = "evil/x:1"\n')
    listed = cli("images", "list")
    assert "agent-desk/minimal:latest" in listed and "decoy" not in listed and "evil" not in listed
    built = cli("images", "build", "minimal", timeout=1200)
    assert "Traceback" not in built
    assert docker_client.images.get("agent-desk/minimal:latest").id.startswith("sha256:")
