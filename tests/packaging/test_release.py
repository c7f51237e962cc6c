"""The packages as a packager checks them (issue 25, item 6): the same wheel bytes from two builds of one commit,
no path of the build machine and no test library in what ships, a Depends that carries the real glibc floor and
every library Qt's xcb plugin needs (each found independently of packaging/elf.py, with objdump), the man page and
the changelog, lintian without errors, and a README that claims what the bundle needs."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from desktop_app.cli import SUBCOMMANDS
from tests.packaging.dist import REPO, _builder, _in_ci, built_dist, deb_field, wait_for_lintian

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
TEST_LIBRARIES = ("hypothesis", "pytest", "_pytest", "pytestqt", "pytest_asyncio", "pytest_timeout", "ruff",
                  "importlinter", "grimp")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_two_builds_of_one_commit_give_the_same_wheel(tmp_path: Path) -> None:
    """Each build from the sdist unpacked at a path of its own (the path must not matter either)."""
    dist = built_dist()
    builder = _builder()
    py = builder.package_venv({})
    wheels = []
    for n in (1, 2):
        with tarfile.open(dist["sdist"]) as tar:
            tar.extractall(tmp_path / f"src{n}", filter="data")
        source = next((tmp_path / f"src{n}").iterdir())
        builder.build_wheel(py, tmp_path / f"out{n}", source, wheel_only=True)
        wheels.append(next((tmp_path / f"out{n}").glob("*.whl")))
    assert wheels[0].name == dist["wheel"].name
    assert _sha(wheels[0]) == _sha(wheels[1]) == _sha(dist["wheel"])


def _build_paths() -> list[str]:
    """The checkout, the build venv and the interpreter's own prefix (unless it is the system's /usr)."""
    builder = _builder()
    venv = next(builder.WORK.glob("venv-*"))
    prefix = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return [str(REPO), str(venv), *([prefix] if prefix not in ("/usr", "/usr/local") else [])]


def test_no_build_path_and_no_test_library_ships() -> None:
    dist = built_dist()
    bundle = dist["bundle"].parent
    leaks = subprocess.run(["grep", "-rlF", *(a for p in _build_paths() for a in ("-e", p)), str(bundle)],
                           capture_output=True, text=True).stdout.split()
    assert leaks == [], f"{len(leaks)} shipped files name a path of the build machine: {leaks[:10]}"
    runpaths = subprocess.run(["sh", "-c", f"find {bundle} -name '*.so*' -type f -exec readelf -dW {{}} + "
                               "| grep -E 'R(UN)?PATH'"], capture_output=True, text=True).stdout
    assert all(p.startswith("$ORIGIN") for p in re.findall(r"path: \[([^\]]*)\]", runpaths)), runpaths[:2000]
    import zipfile

    with zipfile.ZipFile(dist["wheel"]) as whl:
        text = b"".join(whl.read(n) for n in whl.namelist())
    assert str(REPO).encode() not in text
    # The frozen modules (the archive inside the program) and the files beside it: no test library.
    viewer = next(_builder().WORK.glob("venv-*")) / "bin" / "pyi-archive_viewer"
    listing = subprocess.run([str(viewer), "--list", "--recursive", str(dist["bundle"])], capture_output=True,
                             text=True, check=True).stdout
    modules = {m.split(".")[0] for m in re.findall(r"'([\w.]+)'\s*$", listing, re.M)}
    assert "desktop_app" in modules and "docker" in modules  # the listing is real
    files = {p.name.split("-")[0] for p in (bundle / "_internal").iterdir()}
    assert not (modules | files) & set(TEST_LIBRARIES), sorted((modules | files) & set(TEST_LIBRARIES))


def _needed(files: list[Path]) -> set[str]:
    out = subprocess.run(["objdump", "-p", *map(str, files)], capture_output=True, text=True).stdout
    return set(re.findall(r"^\s+NEEDED\s+(\S+)", out, re.M))


def test_depends_carry_the_glibc_floor_and_every_library_qt_xcb_needs() -> None:
    dist = built_dist()
    bundle = dist["bundle"].parent
    depends = [d.strip() for d in deb_field(dist["deb"], "Depends").split(",")]
    names = {d.split()[0] for d in depends}
    elves = [p for p in bundle.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"]
    symbols = subprocess.run(["objdump", "-T", *map(str, elves)], capture_output=True, text=True).stdout
    floor = max(tuple(map(int, v.split("."))) for v in re.findall(r"\(GLIBC_(\d+(?:\.\d+)+)\)", symbols))
    assert f"libc6 (>= {'.'.join(map(str, floor))})" in depends, depends
    carried = {p.name for p in bundle.rglob("*.so*")}
    qt = bundle / "_internal" / "PySide6" / "Qt"
    xcb = [qt / "plugins" / "platforms" / "libqxcb.so", qt / "lib" / "libQt6XcbQpa.so.6"]
    wanted = {n for n in _needed(xcb) if n not in carried and n.startswith("libxcb")}
    assert wanted, "the xcb plugin needs no system xcb library? the check would prove nothing"
    # Debian names libxcb-foo.so.N's package libxcb-fooN (policy 8.1).
    expected = {re.sub(r"\.so\.(\d+)$", r"\1", n) for n in wanted}
    assert expected <= names, f"Depends lacks {sorted(expected - names)}"
    readme = (REPO / "README.md").read_text()
    assert f"glibc {'.'.join(map(str, floor))}" in readme, "the README does not say which glibc the bundle needs"


def _deb_member(deb: Path, name: str) -> bytes:
    data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.extractfile(name).read()  # type: ignore[union-attr]


def test_the_deb_has_a_man_page_from_the_parser_and_a_changelog_and_lintian_finds_no_error() -> None:
    dist = built_dist()
    page = gzip.decompress(_deb_member(dist["deb"], "./usr/share/man/man1/agent-desk.1.gz")).decode()
    assert page.startswith(".TH AGENT\\-DESK 1 ")
    for command in SUBCOMMANDS:
        assert f".SS agent\\-desk {command.replace('-', chr(92) + '-')}" in page, command
    changelog = gzip.decompress(_deb_member(dist["deb"], "./usr/share/doc/agent-desk/changelog.gz")).decode()
    assert changelog.startswith(f"agent-desk ({deb_field(dist['deb'], 'Version')}) ")
    if shutil.which("lintian") is None:
        if _in_ci():
            pytest.fail("lintian is required in CI (`make deb-tools` installs it)", pytrace=False)
        pytest.skip("lintian is not installed (`make deb-tools`)")
    _rc, report = wait_for_lintian(timeout=1200)
    errors = [line for line in report.splitlines() if line.startswith("E: ")]
    warnings = [line for line in report.splitlines() if line.startswith("W: ")]
    assert errors == [], "\n".join(errors[:40])
    print(f"lintian: 0 errors, {len(warnings)} warnings")
