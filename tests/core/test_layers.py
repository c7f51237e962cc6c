"""core is the floor: it loads no other package of the project, nor Qt, nor docker, so the agent runs
headless and tests without a display or a Docker engine. (import-linter checks every layer in `make lint`.)"""

import subprocess
import sys


def _modules_after_importing_core() -> list[str]:
    code = "import sys, desktop_app.core; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_core_imports_neither_qt_nor_docker():
    foreign = ("PySide6", "qasync", "docker", "shiboken6")
    bad = [m for m in _modules_after_importing_core() if m.split(".")[0] in foreign]
    assert bad == []


def test_core_loads_only_core_modules_of_the_project():
    ours = [m for m in _modules_after_importing_core() if m.startswith("desktop_app")]
    assert "desktop_app.core._executor" in ours  # the check sees what core itself loads
    assert [m for m in ours if m != "desktop_app" and not m.startswith("desktop_app.core")] == []
