"""What the packages put on a user's machine: the .deb installs only root-owned files in its own places, with no
set-id bit, no world-writable file, no maintainer script and no link out of the bundle; no package carries a
secret or the builder's state; the desktop entry runs the program itself, never a shell."""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.packaging.dist import REPO, built_dist

DESKTOP = REPO / "packaging" / "agent-desk.desktop"
ALLOWED = ("./usr/lib/agent-desk/", "./usr/bin/agent-desk", "./usr/share/applications/agent-desk.desktop",
           "./usr/share/icons/hicolor/scalable/apps/agent-desk.svg", "./usr/share/doc/agent-desk/",
           "./usr/share/man/man1/agent-desk.1.gz", "./usr/share/lintian/overrides/agent-desk")
FOLDERS = ("./", "./usr/", "./usr/bin/", "./usr/lib/", "./usr/share/", "./usr/share/man/", "./usr/share/man/man1/",
           "./usr/share/lintian/", "./usr/share/lintian/overrides/")
# Names that would be the builder's own state or secrets: a database, a key, a settings or cache folder.
LEAKS = re.compile(r"(^|/)(\.agent-desk|\.git|\.env|\.venv|\.pytest_cache|\.hypothesis)(/|$)|\.db$|\.key$|"
                   r"audit-signing|settings\.json$|trusted_rules\.json$|consent\.json$|(^|/)tests/")
SECRET = re.compile(rb"sk-ant-[A-Za-z0-9_-]{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----")


def _deb_members(deb: Path) -> list[tuple[str, str, str]]:
    """(mode string, owner/group, path[ -> target]) of each member, from `dpkg-deb -c`."""
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        mode, owner, _size, _date, _time, path = line.split(None, 5)
        rows.append((mode, owner, path))
    return rows


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_deb_installs_root_owned_files_in_its_own_places_only() -> None:
    deb = built_dist()["deb"]
    rows = _deb_members(deb)
    assert len(rows) > 100
    for mode, owner, path in rows:
        name = path.split(" -> ")[0]
        assert owner == "root/root", (owner, name)
        assert mode[3] not in "sS" and mode[6] not in "sS", f"set-id bit on {name}"
        assert mode[8] != "w" or mode[0] == "l", f"world-writable {name}"
        assert name in FOLDERS or name.startswith(
            ("./usr/share/applications/", "./usr/share/icons/", "./usr/share/doc/", *ALLOWED)), name
        if mode[0] == "l":
            target = path.split(" -> ")[1]
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            if name == "./usr/bin/agent-desk":
                assert resolved == "usr/lib/agent-desk/agent-desk", path
            else:  # a link inside the bundle stays inside it: nothing resolves into the user's files
                assert not target.startswith("/") and resolved.startswith("usr/lib/agent-desk/"), path
    control = subprocess.run(["dpkg-deb", "-I", str(deb)], check=True, capture_output=True, text=True).stdout
    for script in ("preinst", "postinst", "prerm", "postrm", "config", "triggers"):
        assert f" {script} " not in control and not control.rstrip().endswith(script), f"maintainer script {script}"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_no_package_carries_secrets_or_the_builders_state() -> None:
    dist = built_dist()
    with zipfile.ZipFile(dist["wheel"]) as zf:
        names = zf.namelist()
        blobs = [zf.read(n) for n in names]
    with tarfile.open(dist["sdist"]) as tf:
        members = [m for m in tf.getmembers() if m.isfile()]
        names += [m.name.split("/", 1)[1] for m in members]
        blobs += [tf.extractfile(m).read() for m in members]
    bundle = dist["bundle"].parent / "_internal" / "desktop_app"
    names += [str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()]
    leaks = [n for n in names if LEAKS.search(n)]
    assert not leaks, leaks
    assert not [b[:80] for b in blobs if SECRET.search(b)]
    # The wheel installs its catalog and licence: the user can read what the images are.
    assert "desktop_app/sandbox_images/images.toml" in names and any(n.endswith("licenses/LICENSE") for n in names)


def test_desktop_entry_validates_and_runs_the_program_not_a_shell() -> None:
    if shutil.which("desktop-file-validate") is None:
        from tests.conftest import in_ci

        if in_ci():
            pytest.fail("desktop-file-validate is required in CI (make deb-tools)", pytrace=False)
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")
    proc = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr
    entry = dict(line.split("=", 1) for line in DESKTOP.read_text().splitlines() if "=" in line)
    # One program and at most one file: a field code never reaches a shell, so a crafted folder name cannot either.
    assert entry["Exec"] == "agent-desk %f" and entry["TryExec"] == "agent-desk" and entry["Terminal"] == "false"
    assert entry["Icon"] == "agent-desk"
