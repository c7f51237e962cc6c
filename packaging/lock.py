"""The part of requirements.lock a package is built from: the runtime dependencies and the `package` extra
(PyInstaller, build) with everything they pull in, found through the lock's own `# via` lines, hashes kept.

requirements.lock is one universal, hashed lock of every extra (`uv pip compile --generate-hashes`); the
packages must not carry the test or lint tools it also pins, so the build venv installs only this subset
(`pip install --require-hashes`: a dependency the subset missed is an install error, not a silent fetch)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
EXTRAS = ("package",)  # the optional dependencies a build needs besides the runtime ones
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")
_PROJECT = "agent-desk (pyproject.toml)"


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Pin:
    name: str
    lines: list[str] = field(default_factory=list)  # the requirement and its --hash lines
    via: set[str] = field(default_factory=set)


def parse(text: str) -> list[Pin]:
    """Every pinned requirement of a uv lock, with the packages (or the project) that pull it in."""
    pins: list[Pin] = []
    in_via = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not pins):
            continue
        if not line.startswith((" ", "#")):
            match = _NAME.match(line)
            if match is None:
                raise ValueError(f"requirements.lock: cannot read the line {line!r}")
            pins.append(Pin(normalise(match.group(1)), [line]))
            in_via = False
        elif stripped.startswith("--hash="):
            pins[-1].lines.append(line)
        elif stripped.startswith("# via"):
            rest = stripped[len("# via"):].strip()
            in_via = not rest
            if rest:
                pins[-1].via.add(rest)
        elif in_via and stripped.startswith("#"):
            pins[-1].via.add(stripped.lstrip("# ").strip())
    for pin in pins:
        pin.via = {v if v == _PROJECT else normalise(v) for v in pin.via}
    return pins


def roots(pyproject: Path = ROOT / "pyproject.toml", extras: tuple[str, ...] = EXTRAS) -> set[str]:
    """The names the project asks for directly: its dependencies and the given extras."""
    with open(pyproject, "rb") as fh:
        project = tomllib.load(fh)["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    return {normalise(_NAME.match(req.strip()).group(1)) for req in wanted}  # type: ignore[union-attr]


def subset(pins: list[Pin], wanted: set[str]) -> list[Pin]:
    """The pins of `wanted` and, transitively, of whatever they pull in (a pin is kept when one of its
    `via` parents is kept; the project itself is a parent only of the names it asks for)."""
    keep = set(wanted)
    changed = True
    while changed:
        changed = False
        for pin in pins:
            if pin.name not in keep and pin.via & keep:
                keep.add(pin.name)
                changed = True
    missing = wanted - {p.name for p in pins}
    if missing:
        raise ValueError(f"requirements.lock pins no {', '.join(sorted(missing))}: regenerate it (README: Install)")
    return [p for p in pins if p.name in keep]


def write_subset(out: Path, lock: Path = LOCK) -> list[str]:
    """Write the build's requirements (hashed) to `out`; returns their names."""
    chosen = subset(parse(lock.read_text()), roots())
    out.write_text("".join("\n".join(p.lines) + "\n" for p in chosen))
    return sorted({p.name for p in chosen})
