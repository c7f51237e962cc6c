"""`make package`: the PyInstaller bundle, the .deb around it, the wheel and the sdist, into dist/.

A stamp keyed by a hash of the inputs (sources, catalog, packaging files, the frozen environment's
distributions) lets the next run reuse dist/ as it is. Usage: python packaging/make_package.py [--force]."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deb import build_deb  # a script beside this one, not a package module

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
WORK = ROOT / "build" / "package"
STAMP = DIST / ".inputs-sha256"
INFO = DIST / "build-info.json"
INPUTS = ("desktop_app", "sandbox_images", "packaging", "pyproject.toml", "setup.py", "MANIFEST.in", "LICENSE",
          "README.md")


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def inputs_hash() -> str:
    """Every input file (path, executable bit, bytes), the Python and the installed distributions."""
    h = hashlib.sha256()
    for top in INPUTS:
        base = ROOT / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in files:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            h.update(f"{p.relative_to(ROOT)}\0{p.stat().st_mode & 0o111:o}\0".encode())
            h.update(p.read_bytes())
    h.update(sys.version.encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    h.update("\n".join(dists).encode())
    return h.hexdigest()


def outputs() -> dict[str, Path]:
    ver = version()
    found = {
        "bundle": DIST / "agent-desk" / "agent-desk",
        "wheel": DIST / f"agent_desk-{ver}-py3-none-any.whl",
        "sdist": DIST / f"agent_desk-{ver}.tar.gz",
    }
    debs = sorted(DIST.glob(f"agent-desk_{ver}_*.deb"))
    found["deb"] = debs[0] if debs else DIST / f"agent-desk_{ver}_missing.deb"
    return found


def up_to_date(digest: str) -> bool:
    return STAMP.is_file() and STAMP.read_text().strip() == digest and all(p.exists() for p in outputs().values())


def _size(p: Path) -> int:
    return sum(f.lstat().st_size for f in p.rglob("*") if not f.is_dir()) if p.is_dir() else p.stat().st_size


def _timed(seconds: dict[str, float], name: str, argv: list[str]) -> None:
    t0 = time.monotonic()
    subprocess.run(argv, cwd=ROOT, check=True)
    seconds[name] = round(time.monotonic() - t0, 1)


def build() -> dict[str, object]:
    shutil.rmtree(DIST, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    _timed(seconds, "bundle", [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
                               "--distpath", str(DIST), "--workpath", str(WORK / "pyinstaller"),
                               str(ROOT / "packaging" / "agent-desk.spec")])
    t0 = time.monotonic()
    build_deb(DIST / "agent-desk", DIST, version(), WORK)
    seconds["deb"] = round(time.monotonic() - t0, 1)
    # The sdist first, then the wheel built from it: a file the sdist lacks fails here, not for a user.
    _timed(seconds, "wheel+sdist", [sys.executable, "-m", "build", "--outdir", str(DIST), str(ROOT)])
    out = outputs()
    info = {"version": version(), "seconds": seconds, "bytes": {k: _size(v.parent if k == "bundle" else v)
                                                                  for k, v in out.items()},
            "files": {k: str(v.relative_to(ROOT)) for k, v in out.items()}}
    INFO.write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str]) -> int:
    digest = inputs_hash()
    if "--force" not in argv and up_to_date(digest):
        print(f"package: dist/ is up to date ({digest[:12]}); --force rebuilds it")
        return 0
    for tool in ("PyInstaller", "build"):
        try:
            __import__(tool)
        except ImportError:
            print(f"package: {tool} is missing: pip install -e '.[package]'", file=sys.stderr)
            return 2
    if shutil.which("dpkg-deb") is None:
        print("package: dpkg-deb is missing: apt-get install dpkg", file=sys.stderr)
        return 2
    info = build()
    STAMP.write_text(digest + "\n")
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
