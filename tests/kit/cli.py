"""The CLI as a real process: a clean environment (nothing of the machine's desk or Anthropic settings, the
desk's folders under the test's own), and one call of `python -m desktop_app.cli`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cli_environ(root: Path) -> dict[str, str]:
    """os.environ without any ANTHROPIC_* or AGENT_DESK_* variable, plus a desk kept under `root` (cfg/, data/,
    log/, keys in files), this checkout on PYTHONPATH and Qt offscreen."""
    values = {
        "AGENT_DESK_CONFIG_DIR": str(root / "cfg"), "AGENT_DESK_DATA_DIR": str(root / "data"),
        "AGENT_DESK_LOG_DIR": str(root / "log"), "AGENT_DESK_NO_KEYRING": "1",
        "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen",
    }
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENT_DESK_"))}
    return {**full, **values}


def cli(env: dict[str, str], *args: str, timeout: float = 120, cwd: Path | None = None,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    """`agent-desk ARGS` in a process of its own, its output captured as text; `input` answers its questions
    (the process has no terminal then, so it reads them from stdin)."""
    return subprocess.run([sys.executable, "-m", "desktop_app.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, input=input, start_new_session=input is not None)


def server_cli_environ(root: Path, server: Any) -> dict[str, str]:
    """os.environ plus a desk kept under `root` (cfg/, data/, desk.db, keys in files) whose Anthropic endpoint
    and key are the fake `server`'s, with this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env.update({
        "AGENT_DESK_CONFIG_DIR": str(root / "cfg"), "AGENT_DESK_DATA_DIR": str(root / "data"),
        "AGENT_DESK_DB": f"sqlite:///{root / 'desk.db'}", "AGENT_DESK_NO_KEYRING": "1",
        "ANTHROPIC_API_KEY": server.api_key, "ANTHROPIC_BASE_URL": server.url,
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    return env
