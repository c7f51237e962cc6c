"""The .deb around the PyInstaller bundle: /usr/lib/agent-desk, a /usr/bin/agent-desk link, the desktop entry and
the icon, the man page and the changelog, with the Debian packages the bundle loads but does not carry.

Depends is computed (packaging/elf.py): every NEEDED entry of the bundle's ELF files that the bundle does not
carry, mapped to its Debian package, and libc6 at the highest GLIBC_ symbol version the bundle asks for; plus
RUNTIME, what Qt loads with dlopen (no NEEDED entry shows it). tests/packaging installs only these in a clean
bookworm container and checks every library resolves there."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import elf  # a script beside this one

ROOT = Path(__file__).resolve().parent.parent
PREFIX = Path("/usr/lib/agent-desk")  # the bundle: a program's private libraries live under /usr/lib (FHS)
# What no NEEDED entry shows: a font for fontconfig, and what Qt opens with dlopen (D-Bus for the session bus,
# GLVND's libOpenGL): found by running the bundle in a clean bookworm container (tests/packaging).
RUNTIME = ("fonts-dejavu-core", "libdbus-1-3", "libopengl0")
RECOMMENDS = ("docker.io",)
DESCRIPTION = """\
desktop workbench for an LLM agent whose every tool call is governed
 Agent Desk runs an LLM coding agent (Anthropic Messages API) whose bash and
 file tools run in a hardened Docker container. Every tool call goes through a
 permission policy and is recorded in a hash-chained, signed audit log."""


def architecture() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()


def _normalise_modes(top: Path) -> None:
    # dpkg keeps the staged modes: 0755 for folders and programs, 0644 for the rest (shared libraries too:
    # they are mapped, not run), whatever the umask was.
    for dirpath, _dirs, filenames in os.walk(top):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink():
                library = ".so" in p.name and (p.name.endswith(".so") or ".so." in p.name)
                p.chmod(0o755 if p.stat().st_mode & 0o111 and not library else 0o644)


def _strip(top: Path) -> None:
    """Debug symbols out of the shared libraries (as dh_strip does); never the program itself: PyInstaller
    appends its archive to it, which strip would cut off."""
    libraries = [p for p in elf.elf_files(top) if ".so" in p.name]
    for i in range(0, len(libraries), 200):
        subprocess.run(["strip", "--strip-unneeded", "--remove-section=.comment", "--remove-section=.note",
                        *map(str, libraries[i:i + 200])], check=True)


def depends(bundle: Path) -> list[str]:
    """The computed Depends (libc6 with its floor first), then the dlopen'ed packages the scan cannot see."""
    computed = elf.debian_depends(bundle)
    names = {d.split()[0] for d in computed}
    return computed + sorted(p for p in RUNTIME if p not in names)


def _control(version: str, installed_kib: int, depends: list[str]) -> str:
    return (
        "Package: agent-desk\n"
        f"Version: {version}\n"
        f"Architecture: {architecture()}\n"
        "Maintainer: Agent Desk maintainers <maintainers@agent-desk.invalid>\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {', '.join(depends)}\n"
        f"Recommends: {', '.join(RECOMMENDS)}\n"
        "Section: devel\n"
        "Priority: optional\n"
        f"Description: {DESCRIPTION}\n"
    )


def _gzip(src: bytes, dest: Path) -> None:
    """gzip -9n: no name, no time stamp, so the same input gives the same bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
        gz.write(src)


def _docs(stage: Path, py: Path) -> None:
    """The changelog (packaging/changelog, Debian's format) and agent-desk(1) from the argparse tree."""
    doc = stage / "usr" / "share" / "doc" / "agent-desk"
    _gzip((ROOT / "packaging" / "changelog").read_bytes(), doc / "changelog.gz")
    page = stage / "agent-desk.1"
    subprocess.run([str(py), str(ROOT / "packaging" / "manpage.py"), str(page)], check=True)
    _gzip(page.read_bytes(), stage / "usr" / "share" / "man" / "man1" / "agent-desk.1.gz")
    page.unlink()
    overrides = stage / "usr" / "share" / "lintian" / "overrides"
    overrides.mkdir(parents=True)
    shutil.copy(ROOT / "packaging" / "lintian-overrides", overrides / "agent-desk")


def _stage(bundle: Path, stage: Path) -> None:
    shutil.copytree(bundle, stage / PREFIX.relative_to("/"), symlinks=True)
    _strip(stage / PREFIX.relative_to("/"))
    (stage / "usr" / "bin").mkdir(parents=True)
    (stage / "usr" / "bin" / "agent-desk").symlink_to(f"../lib/{PREFIX.name}/agent-desk")
    apps = stage / "usr" / "share" / "applications"
    apps.mkdir(parents=True)
    shutil.copy(ROOT / "packaging" / "agent-desk.desktop", apps / "agent-desk.desktop")
    icons = stage / "usr" / "share" / "icons" / "hicolor" / "scalable" / "apps"
    icons.mkdir(parents=True)
    shutil.copy(ROOT / "desktop_app" / "ui" / "resources" / "agent-desk.svg", icons / "agent-desk.svg")
    doc = stage / "usr" / "share" / "doc" / "agent-desk"
    doc.mkdir(parents=True)
    shutil.copy(ROOT / "LICENSE", doc / "copyright")


def build_deb(bundle: Path, out_dir: Path, version: str, work: Path, py: Path) -> Path:
    """dist/agent-desk_VERSION_ARCH.deb from the one-folder bundle at `bundle` (`py`: the build venv's python,
    which has the package installed, for the man page)."""
    stage = work / "deb-root"
    shutil.rmtree(stage, ignore_errors=True)
    _stage(bundle, stage)
    _docs(stage, py)
    _normalise_modes(stage)
    kib = sum(p.lstat().st_size for p in stage.rglob("*") if not p.is_dir()) // 1024 + 1
    (stage / "DEBIAN").mkdir()
    (stage / "DEBIAN" / "control").write_text(_control(version, kib, depends(bundle)))
    out = out_dir / f"agent-desk_{version}_{architecture()}.deb"
    # gzip -1: what lintian reads (not zstd), 4x faster to make than gzip -9 on a 2-core machine for 7% more;
    # SOURCE_DATE_EPOCH (make_package sets it) clamps the members' times.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(stage), str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(stage, ignore_errors=True)
    return out
