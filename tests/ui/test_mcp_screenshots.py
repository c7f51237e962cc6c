"""`agent-desk --sample-data --screenshot PATH --view project-mcp | settings-mcp`: the demo's MCP servers
rendered offscreen, as the README's pictures are made."""

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from tests.kit import isolated_environ

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("view", ["project-mcp", "settings-mcp"])
def test_the_mcp_views_render_from_the_sample_data(tmp_path, view):
    env = isolated_environ(tmp_path, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    png = tmp_path / f"{view}.png"
    out = subprocess.run([sys.executable, "-m", "desktop_app.app", "--sample-data", "--screenshot", str(png),
                          "--view", view, "--size", "1024x700"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and f"screenshot saved: {png}" in out.stdout
    image = QImage(str(png))
    # the dialog (the main window, 1024x700, is what a missing dialog would leave)
    assert image.width() >= 600 and image.height() >= 350 and (image.width(), image.height()) != (1024, 700)
