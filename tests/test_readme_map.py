"""tests/README.md stays honest: every module its map names exists under desktop_app/, and every test file or
folder it names exists under tests/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "tests" / "README.md").read_text()
MAP = README[README.index("## Where the tests of a module are"):]
ROWS = [line for line in MAP.splitlines() if line.startswith("| `")]


def test_the_map_has_rows() -> None:
    assert len(ROWS) >= 30


def test_every_module_named_in_the_map_exists() -> None:
    modules = [re.match(r"\| `([^`]+)`", row).group(1) for row in ROWS]  # type: ignore[union-attr]
    missing = [m for m in modules if not (ROOT / "desktop_app" / m).is_file()]
    assert not missing, f"tests/README.md names modules that do not exist: {missing}"


def test_every_test_file_named_in_the_readme_exists() -> None:
    named = set(re.findall(r"`(tests/[\w/.]+)`", README))
    missing = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"tests/README.md names test files that do not exist: {missing}"
