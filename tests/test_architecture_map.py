"""docs/architecture.md is the map of the house: every module under desktop_app/ is named in it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "desktop_app"
MAP = ROOT / "docs" / "architecture.md"
# Alembic's revision files are named as one room (store/migrations/versions/), not one by one.
NAMED_AS_A_FOLDER = ("store/migrations/versions/",)


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if "__pycache__" in rel or rel.endswith("__init__.py") or rel.startswith(NAMED_AS_A_FOLDER):
            continue
        found.append(rel)
    return found


def test_the_map_names_every_module() -> None:
    text = MAP.read_text(encoding="utf-8")
    missing = [rel for rel in _modules() if f"`{rel}`" not in text]
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_every_module_the_map_names_exists() -> None:
    text = MAP.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))
    # A bare file name (`_model.py` in "ui/<part>/: `_model.py`") names a kind of module, not one module.
    qualified = {n for n in named if "/" in n}
    stale = sorted(n for n in qualified
                   if not (PACKAGE / n).exists() and not (ROOT / n).exists() and not n.startswith("store/migrations/"))
    assert not stale, f"docs/architecture.md names modules that do not exist: {stale}"
