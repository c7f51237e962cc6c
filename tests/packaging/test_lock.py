"""requirements.lock is hashed, and the part a package is built from (packaging/lock.py) holds what the bundle
runs and builds with, and no test or lint tool (fast: no build)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.packaging.dist import REPO
from tests.packaging.test_release import TEST_LIBRARIES

_spec = importlib.util.spec_from_file_location("agent_desk_lock", REPO / "packaging" / "lock.py")
lock = sys.modules.setdefault("agent_desk_lock", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(lock)


def test_every_pin_of_the_lock_has_hashes() -> None:
    pins = lock.parse(lock.LOCK.read_text())
    assert len(pins) > 50
    unhashed = [p.lines[0] for p in pins if not any("--hash=sha256:" in line for line in p.lines[1:])]
    assert unhashed == [], unhashed[:5]


def test_the_build_takes_the_runtime_and_the_package_tools_and_no_test_library(tmp_path: Path) -> None:
    names = set(lock.write_subset(tmp_path / "reqs.txt"))
    assert {"pyinstaller", "build", "setuptools", "pyside6-essentials", "anthropic", "docker", "cryptography"} <= names
    test_tools = {lock.normalise(n) for n in (*TEST_LIBRARIES, "pytest-qt", "pytest-asyncio", "import-linter")}
    assert not names & test_tools, sorted(names & test_tools)
    text = (tmp_path / "reqs.txt").read_text()
    assert "hypothesis" not in text and text.count("--hash=sha256:") >= len(names)


def test_a_lock_line_that_is_not_a_requirement_is_named() -> None:
    with pytest.raises(ValueError, match=r"cannot read the line '==1\.0'"):
        lock.parse("==1.0\n")
    with pytest.raises(ValueError, match="pins no pyinstaller"):
        lock.subset(lock.parse("anthropic==2.0 \\\n    --hash=sha256:ab\n    # via agent-desk (pyproject.toml)\n"),
                    {"anthropic", "pyinstaller"})
