"""The helper's fs_glob in-process, on its walker (rg's listing is checked in the container by
tests/tools/test_fs.py): path order by default, newest first on request, and the literal-tail shortcuts (the
str test before the regex, and no regex at all for `**/*.py`) never change what matches."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from desktop_app.core import glob_regex
from desktop_app.sandbox.helper.search import Search
from desktop_app.sandbox.helper.workspace import Workspace

NAMES = ["b.py", "a.py", "c.txt", "d.pyi", "x.py/inner.txt", "src/deep/e.py", "src/f.PY", "g[1].py", "h{a}.py",
         "odd\\name.py", "tests/t.py", "pkg/tests/u.py"]
PATTERNS = ["**/*.py", "*.py", "src/**", "**/tests", "**/*.{py,txt}", "g[1].py", "g[!x]*", "h{a}.py", "**/?.py",
            "odd\\name.py", "**/*.py/**", "**/inner.txt", "*", "**/*PY",
            # `**/*` and a plain end: the end alone decides (no regex); the folder named like the end is a match
            "**/*.pyi", "**/*y", "**/*1].py", "**/*a}.py", "**/*\\name.py", "**/*.py/inner.txt"]


@pytest.fixture
def search() -> Search:
    return Search(rg=None)


@pytest.fixture
def tree(tmp_path: Path) -> Workspace:
    for i, name in enumerate(NAMES):
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
        os.utime(f, (1_600_000_000 + i * 10, 1_600_000_000 + i * 10))
    for d in {p for p in tmp_path.rglob("*") if p.is_dir()}:
        os.utime(d, (1_500_000_000, 1_500_000_000))  # folders are entries too: older than every file
    return Workspace(str(tmp_path), str(tmp_path))


def _expected(root: Path, pattern: str) -> list[str]:
    """Every file and every folder that holds a file, matched by the regex alone (no shortcut)."""
    rx = glob_regex(pattern)
    entries = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    entries |= {str(Path(e).parents[i]) for e in list(entries) for i in range(len(Path(e).parts) - 1)}
    return sorted(e for e in entries if rx.match(e))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_glob_matches_what_the_regex_matches_in_path_order(search: Search, tree: Workspace, pattern: str) -> None:
    got = [d["path"] for d in search.glob(tree, pattern, ".", 500)]
    assert got == _expected(Path(tree.root), pattern)


def test_glob_newest_first_on_request_and_the_limit_keeps_the_first(search: Search, tree: Workspace) -> None:
    newest = [d["path"] for d in search.glob(tree, "**/*.py", ".", 3, newest_first=True)]
    assert newest == ["pkg/tests/u.py", "tests/t.py", "odd\\name.py"]
    first = [d["path"] for d in search.glob(tree, "**/*.py", ".", 3)]
    assert first == sorted(_expected(Path(tree.root), "**/*.py"))[:3]
    assert not any(re.search(r"\.txt$", p) for p in first)
