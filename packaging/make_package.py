"""`make package`: the wheel and the sdist, the PyInstaller bundle, the .deb around it, into dist/.

Built in a clean venv of its own (build/package/venv-HASH) holding only the hashed pins of requirements.lock
that the runtime and the `package` extra need (packaging/lock.py), never the dev environment: no test library
can reach the bundle. The venv's interpreter is Debian's /usr/bin/python3 where there is one (its prefix is
/usr, not a path of the build machine), else $AGENT_DESK_PACKAGE_PYTHON, else this one. SOURCE_DATE_EPOCH
is the commit's time, so two builds of one commit give the same wheel bytes (tests/packaging checks).

A stamp keyed by a hash of the inputs (sources, catalog, packaging files, the lock, the interpreter) lets the
next run reuse dist/ as it is. Usage: python packaging/make_package.py [--force]."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lock  # scripts beside this one, not package modules
from deb import build_deb

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
WORK = ROOT / "build" / "package"
STAMP = DIST / ".inputs-sha256"
INFO = DIST / "build-info.json"
INPUTS = ("desktop_app", "sandbox_images", "packaging", "pyproject.toml", "setup.py", "MANIFEST.in", "LICENSE",
          "README.md", "requirements.lock")
DEBIAN_PYTHON = Path("/usr/bin/python3")


def version() -> str:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def base_python() -> str:
    """The interpreter the build venv is made from (its libpython goes into the bundle)."""
    chosen = os.environ.get("AGENT_DESK_PACKAGE_PYTHON")
    if chosen:
        return chosen
    if DEBIAN_PYTHON.is_file():
        # 3.11-3.13, with a shared libpython (PyInstaller bundles it) and ensurepip (Debian's python3-venv)
        code = ("import sys, sysconfig, ensurepip; print(int((3, 11) <= sys.version_info[:2] < (3, 14) and "
                "bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))))")
        probe = subprocess.run([str(DEBIAN_PYTHON), "-c", code], capture_output=True, text=True)
        if probe.stdout.strip() == "1":
            return str(DEBIAN_PYTHON)
    return sys.executable


def source_date_epoch() -> str:
    """The commit's time (reproducible builds), else the newest input's modification time."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    proc = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    if proc.returncode == 0 and proc.stdout.strip().isdigit():
        return proc.stdout.strip()
    return str(int(max((ROOT / top).stat().st_mtime for top in INPUTS if (ROOT / top).exists())))


def build_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(SOURCE_DATE_EPOCH=source_date_epoch(), PYTHONHASHSEED="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _uv() -> str | None:
    """uv from the `package` extra (or on PATH), else None (pip then)."""
    try:
        import uv  # type: ignore[import-not-found]

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def install_into(py: Path) -> list[str]:
    """The command that installs into the build venv at `py` (uv's, else the venv's pip)."""
    uv = _uv()
    return [uv, "pip", "install", "-q", "--python", str(py)] if uv else [str(py), "-m", "pip", "install", "-q"]


def package_venv(seconds: dict[str, float]) -> Path:
    """build/package/venv-HASH: made once per lock and interpreter, from the lock's hashed pins only."""
    base = base_python()
    key = hashlib.sha256(lock.LOCK.read_bytes() + base.encode() + (ROOT / "pyproject.toml").read_bytes())
    where = WORK / f"venv-{key.hexdigest()[:12]}"
    py = where / "bin" / "python"
    if (where / ".complete").is_file():
        return py
    for old in WORK.glob("venv-*"):
        shutil.rmtree(old, ignore_errors=True)
    t0 = time.monotonic()
    reqs = WORK / "requirements-package.txt"
    lock.write_subset(reqs)
    uv = _uv()
    if uv:  # several times faster than pip; the same hashes are checked
        subprocess.run([uv, "venv", "-q", "--python", base, str(where)], check=True, env=build_env())
    else:
        subprocess.run([base, "-m", "venv", "--clear", str(where)], check=True)
    subprocess.run([*install_into(py), "--require-hashes", "--only-binary", ":all:", "-r", str(reqs)], check=True,
                   env=build_env())
    (where / ".complete").write_text(base + "\n")
    seconds["venv"] = round(time.monotonic() - t0, 1)
    return py


def inputs_hash() -> str:
    """Every input file (path, executable bit, bytes) and the interpreter the bundle is made from."""
    h = hashlib.sha256()
    for top in INPUTS:
        base = ROOT / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in files:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            h.update(f"{p.relative_to(ROOT)}\0{p.stat().st_mode & 0o111:o}\0".encode())
            h.update(p.read_bytes())
    h.update(base_python().encode())
    h.update(source_date_epoch().encode())
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


def _timed(seconds: dict[str, float], name: str, argv: list[str], cwd: Path = ROOT) -> None:
    t0 = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, env=build_env())
    seconds[name] = round(time.monotonic() - t0, 1)


def where_installed(py: Path) -> Path:
    """The build venv's site-packages."""
    return Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())


def build_wheel(py: Path, outdir: Path, source: Path = ROOT, *, wheel_only: bool = False) -> None:
    """The sdist, then the wheel built from it (a file the sdist lacks fails here, not for a user), with the
    venv's pinned setuptools (no isolation: nothing unpinned is fetched); `wheel_only` from an unpacked sdist."""
    subprocess.run([str(py), "-m", "build", "--no-isolation", *(["--wheel"] if wheel_only else []), "--outdir",
                    str(outdir), str(source)], cwd=source, check=True, env=build_env(), stdout=subprocess.DEVNULL)


def build() -> dict[str, object]:
    shutil.rmtree(DIST, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    py = package_venv(seconds)
    t0 = time.monotonic()
    build_wheel(py, DIST)
    seconds["wheel+sdist"] = round(time.monotonic() - t0, 1)
    # The bundle is made from the wheel installed in the clean venv (its metadata, not a checkout's).
    _timed(seconds, "install", [*install_into(py), "--no-deps", "--reinstall" if _uv() else "--force-reinstall",
                                str(outputs()["wheel"])])
    # The installer's record of where the wheel came from names this checkout: it must not ship.
    for record in where_installed(py).glob("agent_desk-*.dist-info/direct_url.json"):
        record.unlink()
    _timed(seconds, "bundle", [str(py), "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
                               "--distpath", str(DIST), "--workpath", str(WORK / "pyinstaller"),
                               str(ROOT / "packaging" / "agent-desk.spec")], cwd=WORK)
    t0 = time.monotonic()
    build_deb(DIST / "agent-desk", DIST, version(), WORK, py)
    seconds["deb"] = round(time.monotonic() - t0, 1)
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
    for tool, package in (("dpkg-deb", "dpkg"), ("readelf", "binutils")):
        if shutil.which(tool) is None:
            print(f"package: {tool} is missing: apt-get install {package} (or `make deb-tools`)", file=sys.stderr)
            return 2
    info = build()
    STAMP.write_text(digest + "\n")
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
