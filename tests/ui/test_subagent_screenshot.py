"""`agent-desk --sample-data --screenshot PATH --view subagent`: the demo's sub-agent, nested under its task_run
call in the timeline and marked in the inbox, rendered offscreen as the README's picture is made."""

import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

from tests.kit import isolated_environ

ROOT = Path(__file__).resolve().parents[2]


def test_the_subagent_view_renders_from_the_sample_data(tmp_path):
    env = isolated_environ(tmp_path, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    png = tmp_path / "subagent.png"
    out = subprocess.run([sys.executable, "-m", "desktop_app.app", "--sample-data", "--screenshot", str(png),
                          "--view", "subagent", "--size", "1024x700"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and f"screenshot saved: {png}" in out.stdout
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1024, 700)
