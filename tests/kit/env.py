"""The isolated desk environment: settings, data and keys of a test kept in its own folders, and no Anthropic
endpoint or key inherited from the machine."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

# What leaks in from the person running the suite: their key and their gateway.
INHERITED = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def desk_variables(root: Path) -> dict[str, str]:
    """The variables that put a desk's settings and data under `root` and its keys in files (no keyring)."""
    return {"AGENT_DESK_CONFIG_DIR": str(root / "cfg"), "AGENT_DESK_DATA_DIR": str(root / "data"),
            "AGENT_DESK_NO_KEYRING": "1"}


def isolate(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Isolate this process's desk under `root` (cfg/, data/) for one test; undone by monkeypatch."""
    for name, value in desk_variables(root).items():
        monkeypatch.setenv(name, value)
    for name in INHERITED:
        monkeypatch.delenv(name, raising=False)


def isolated_environ(root: Path, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a desk subprocess isolated under `root`: `base` (os.environ by default) without the
    inherited Anthropic variables, plus the desk's variables and `extra`."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in INHERITED}
    return {**env, **desk_variables(root), **extra}
