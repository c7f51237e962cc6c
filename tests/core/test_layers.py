"""core imports neither Qt nor docker, so the engine runs headless."""

import subprocess
import sys


def test_core_imports_neither_qt_nor_docker():
    code = (
        "import sys, desktop_app.core, desktop_app.core._executor;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'docker', 'shiboken6'));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
