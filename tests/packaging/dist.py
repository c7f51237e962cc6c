"""dist/ as `make package` leaves it, built once per session (packaging/make_package.py reuses it when a hash of its
inputs did not change), shared by the install tests and the security checks of the packages."""

from __future__ import annotations

import functools
import importlib.util
import os
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
    missing = [m for m in ("PyInstaller", "build") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed (pip install -e '.[package]')"
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
    return _builder().outputs()


@functools.cache
def _builder():
    spec = importlib.util.spec_from_file_location("agent_desk_make_package", REPO / "packaging" / "make_package.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deb_field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True, text=True).stdout.strip()
