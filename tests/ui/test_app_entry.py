"""The app's entry point as a user meets it on a machine without a display."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_display_the_app_says_what_to_do_instead_of_aborting(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(AGENT_DESK_CONFIG_DIR=str(tmp_path / "cfg"), AGENT_DESK_DATA_DIR=str(tmp_path / "data"),
               PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "desktop_app.cli"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert "no display" in out.stderr and "--screenshot" in out.stderr and "agent-desk run" in out.stderr
    assert "Traceback" not in out.stderr
