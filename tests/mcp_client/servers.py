"""Real MCP servers for the tests, from the registries: mcp-server-time and mcp-server-git from PyPI in a venv
of their own, @modelcontextprotocol/server-everything and server-memory from npm, pinned, made once per
machine under the test cache folder (a lock makes concurrent sessions wait for the first)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

PYPI_SERVERS = ("mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19")
NPM_SERVERS = ("@modelcontextprotocol/server-everything@2026.8.31", "@modelcontextprotocol/server-memory@2026.8.31")


def cache_root() -> Path:
    base = os.environ.get("AGENT_DESK_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "agent-desk-tests")
    return Path(base)


def _key(pins: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]


def _made_once(folder: Path, make) -> Path:
    """`make(folder)` once: a `.done` marker says it finished; the lock serialises sessions."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            make(folder)
            (folder / ".done").write_text("ok")
    return folder


def python_servers() -> Path:
    """The venv's bin folder, with `mcp-server-time` and `mcp-server-git`."""
    def make(folder: Path) -> None:
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
        subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", *PYPI_SERVERS], check=True)
    return _made_once(cache_root() / f"pypi-{_key(PYPI_SERVERS)}", make) / "bin"


def node_servers() -> Path:
    """The npm prefix: node_modules/@modelcontextprotocol/server-everything and server-memory."""
    def make(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--silent",
                        *NPM_SERVERS], check=True)
    return _made_once(cache_root() / f"npm-{_key(NPM_SERVERS)}", make)


if __name__ == "__main__":  # make both ahead of a test run: python -m tests.mcp_client.servers
    print(python_servers(), node_servers(), file=sys.stderr)
