"""dist/ as `make package` leaves it, built once per session (packaging/make_package.py reuses it when a hash of its
inputs did not change), shared by the install tests and the security checks of the packages."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "dist"
BUILD_TIMEOUT_S = 1800  # a cold build is ~4 min alone; a loaded 2-core CI machine is several times slower


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@functools.cache
def _build() -> str:
    """'' when dist/ is ready, else why not."""
    # PyInstaller and build come from requirements.lock into the build's own venv; these are Debian's.
    missing = [t for t in ("dpkg-deb", "readelf", "strip") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (`make deb-tools`)"
    proc = subprocess.run([sys.executable, str(REPO / "packaging" / "make_package.py")], cwd=REPO, capture_output=True,
                          text=True, timeout=BUILD_TIMEOUT_S)
    if proc.returncode != 0:
        pytest.fail(f"make package failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}", pytrace=False)
    return ""


def built_dist() -> dict[str, Path]:
    """The bundle, the .deb, the wheel and the sdist; skipped without the tools (a failure in CI)."""
    why = _build()
    if why:
        if _in_ci():
            pytest.fail(f"packaging tools are required in CI: {why}", pytrace=False)
        pytest.skip(why)
    lintian_report()  # started now, read at the end
    return _builder().outputs()


@functools.cache
def _builder():
    spec = importlib.util.spec_from_file_location("agent_desk_make_package", REPO / "packaging" / "make_package.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deb_field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True, text=True).stdout.strip()


@functools.cache
def lintian_report() -> Path | None:
    """lintian on the .deb, started in the background once dist/ is built (a minute or two on a loaded machine:
    it runs while the install tests do); test_release.py waits for it. None without lintian."""
    if shutil.which("lintian") is None:
        return None
    deb = _builder().outputs()["deb"]
    report = DIST / "lintian.txt"
    with open(report, "w") as fh:
        proc = subprocess.Popen(["lintian", "--tag-display-limit", "0", str(deb)], stdout=fh, stderr=subprocess.STDOUT)
    _LINTIAN.append(proc)
    atexit.register(lambda: proc.poll() is None and proc.kill())  # a session that never read it ends it
    return report


_LINTIAN: list[subprocess.Popen] = []


def wait_for_lintian(timeout: float) -> tuple[int, str]:
    report = lintian_report()
    if report is None:
        return -1, ""
    rc = _LINTIAN[0].wait(timeout=timeout)
    return rc, report.read_text(errors="replace")
