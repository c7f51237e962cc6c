"""The .deb around the PyInstaller bundle: /opt/agent-desk, a /usr/bin/agent-desk link, the desktop entry and
the icon, with the Debian packages the bundle loads but does not carry (found by running it in a clean
bookworm container: tests/packaging checks every library resolves there with only these installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The Qt xcb (and wayland) platform plugins' libraries, GL/EGL, fonts and D-Bus; the bundle carries Qt itself.
DEPENDS = (
    "libc6", "libxcb-cursor0", "libxkbcommon-x11-0", "libxkbcommon0", "libxcb-icccm4", "libxcb-image0",
    "libxcb-keysyms1", "libxcb-render-util0", "libxcb-xinerama0", "libxcb-shape0", "libxcb-randr0",
    "libxcb-xfixes0", "libxcb-sync1", "libxcb-xkb1", "libxcb-shm0", "libxcb-render0", "libxcb1",
    "libx11-xcb1", "libegl1", "libgl1", "libopengl0", "libfontconfig1", "libfreetype6", "libdbus-1-3",
    "libglib2.0-0", "libwayland-client0", "libwayland-cursor0", "libwayland-egl1", "fonts-dejavu-core",
)
RECOMMENDS = ("docker.io",)
DESCRIPTION = """\
desktop workbench for an LLM agent whose every tool call is governed
 Agent Desk runs an LLM coding agent (Anthropic Messages API) whose bash and
 file tools run in a hardened Docker container. Every tool call goes through a
 permission policy and is recorded in a hash-chained, signed audit log."""


def architecture() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()


def _normalise_modes(top: Path) -> None:
    # dpkg keeps the staged modes: 0755 for folders and programs, 0644 for the rest, whatever the umask was.
    for dirpath, _dirs, filenames in os.walk(top):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                p.chmod(0o755 if p.stat().st_mode & 0o111 else 0o644)


def _control(version: str, installed_kib: int) -> str:
    return (
        "Package: agent-desk\n"
        f"Version: {version}\n"
        f"Architecture: {architecture()}\n"
        "Maintainer: Agent Desk maintainers <maintainers@agent-desk.invalid>\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {', '.join(DEPENDS)}\n"
        f"Recommends: {', '.join(RECOMMENDS)}\n"
        "Section: devel\n"
        "Priority: optional\n"
        f"Description: {DESCRIPTION}\n"
    )


def _stage(bundle: Path, stage: Path) -> None:
    shutil.copytree(bundle, stage / "opt" / "agent-desk", symlinks=True)
    (stage / "usr" / "bin").mkdir(parents=True)
    (stage / "usr" / "bin" / "agent-desk").symlink_to("/opt/agent-desk/agent-desk")
    apps = stage / "usr" / "share" / "applications"
    apps.mkdir(parents=True)
    shutil.copy(ROOT / "packaging" / "agent-desk.desktop", apps / "agent-desk.desktop")
    icons = stage / "usr" / "share" / "icons" / "hicolor" / "scalable" / "apps"
    icons.mkdir(parents=True)
    shutil.copy(ROOT / "desktop_app" / "ui" / "resources" / "agent-desk.svg", icons / "agent-desk.svg")
    doc = stage / "usr" / "share" / "doc" / "agent-desk"
    doc.mkdir(parents=True)
    shutil.copy(ROOT / "LICENSE", doc / "copyright")


def build_deb(bundle: Path, out_dir: Path, version: str, work: Path) -> Path:
    """dist/agent-desk_VERSION_ARCH.deb from the one-folder bundle at `bundle`."""
    stage = work / "deb-root"
    shutil.rmtree(stage, ignore_errors=True)
    _stage(bundle, stage)
    _normalise_modes(stage)
    kib = sum(p.lstat().st_size for p in stage.rglob("*") if not p.is_dir()) // 1024 + 1
    (stage / "DEBIAN").mkdir()
    (stage / "DEBIAN" / "control").write_text(_control(version, kib))
    out = out_dir / f"agent-desk_{version}_{architecture()}.deb"
    # gzip: read by every dpkg, and several times faster to make than xz on a 2-core machine.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(stage), str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(stage, ignore_errors=True)
    return out
