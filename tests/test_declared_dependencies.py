"""Every third-party package the shipped code imports is declared in pyproject.toml (the standard library
excepted), and the declared floors start quietly: no library warning on a command (keyring 24.0.0 printed one
on each; .ci/floors runs this file at the floors too)."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.kit.cli import cli_environ

ROOT = Path(__file__).resolve().parents[1]


def _imported_top_modules() -> dict[str, set[str]]:
    """Each absolute import's top-level module under desktop_app/, with the files importing it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "desktop_app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["postgres"]
    return {canonicalize_name(Requirement(r).name) for r in reqs}


def test_every_imported_package_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = []
    for module, files in sorted(_imported_top_modules().items()):
        if module in sys.stdlib_module_names or module in ("desktop_app", "__future__"):
            continue
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists:
            missing.append(f"{module} (no installed distribution provides it; imported by {sorted(files)[0]})")
        elif not dists & declared:
            missing.append(f"{module} (from {', '.join(sorted(dists))}; imported by {sorted(files)[0]})")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)


def test_the_check_sees_an_undeclared_import() -> None:
    """The scan is not vacuous: it finds the packages the code is known to import directly."""
    modules = _imported_top_modules()
    for module in ("anyio", "httpx2", "mcp_types", "shiboken6", "jiter", "rfc8785", "keyring"):
        assert module in modules, module
    assert "numpy" not in _declared()


def test_a_command_prints_no_library_warning(tmp_path: Path) -> None:
    """With the keyring consulted (no AGENT_DESK_NO_KEYRING) and no keyring config file, a command that reads
    the key prints its own error and nothing else: no library's warning."""
    env = cli_environ(tmp_path)
    env.pop("AGENT_DESK_NO_KEYRING")
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONWARNINGS="default")
    out = subprocess.run([sys.executable, "-m", "desktop_app.cli", "run", "--project", str(tmp_path), "hi"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("agent-desk: No Anthropic API key"), out.stderr
    assert not [ln for ln in lines if "warning" in ln.lower() or "Keyring config" in ln], out.stderr
