"""What the bundle's ELF files ask of the system: the NEEDED sonames the bundle does not carry, mapped to the
Debian packages that ship them, and the highest GLIBC_ symbol version (the glibc floor), read with readelf."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

GLIBC_SONAMES = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
                 "libresolv.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libanl.so.1")
# Debian names a library's package after its soname (policy 8.1), except these.
_NAMED_OTHERWISE = {"libglib-2.0.so.0": "libglib2.0-0", "libgobject-2.0.so.0": "libglib2.0-0",
                    "libgthread-2.0.so.0": "libglib2.0-0", "libgio-2.0.so.0": "libglib2.0-0",
                    "libgmodule-2.0.so.0": "libglib2.0-0", "libstdc++.so.6": "libstdc++6",
                    "libgcc_s.so.1": "libgcc-s1", "libz.so.1": "zlib1g"}
_GLIBC_VERSION = re.compile(r"Name: GLIBC_([0-9]+(?:\.[0-9]+)+)\b")
_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")


def elf_files(top: Path) -> list[Path]:
    out = []
    for p in sorted(top.rglob("*")):
        if p.is_file() and not p.is_symlink():
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    out.append(p)
    return out


def _readelf(args: list[str], files: list[Path]) -> str:
    chunks = []
    for i in range(0, len(files), 200):  # a bounded command line
        proc = subprocess.run(["readelf", "-W", *args, *map(str, files[i:i + 200])], capture_output=True, text=True)
        chunks.append(proc.stdout)
    return "\n".join(chunks)


def glibc_floor(files: list[Path]) -> str:
    """The highest GLIBC_x.y any of `files` needs ('' if none)."""
    versions = {tuple(int(n) for n in v.split(".")) for v in _GLIBC_VERSION.findall(_readelf(["-V"], files))}
    return ".".join(map(str, max(versions))) if versions else ""


def needed(files: list[Path]) -> set[str]:
    return set(_NEEDED.findall(_readelf(["-d"], files)))


def external_needed(top: Path, files: list[Path] | None = None) -> set[str]:
    """The sonames that `files` (default: every ELF file under `top`) need and no file under `top` provides."""
    files = elf_files(top) if files is None else files
    carried = {p.name for p in top.rglob("*.so*")}
    return {n for n in needed(files) if n not in carried}


def _ldconfig() -> dict[str, str]:
    proc = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*(\S+) \((?:libc6,)?x86-64[^)]*\) => (\S+)|\s*(\S+) \([^)]*\) => (\S+)", line)
        if m:
            name, path = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            out.setdefault(name, path)
    return out


def by_convention(soname: str) -> str:
    """Debian's package name for a soname: libfoo.so.N is libfooN, libfoo2.so.N is libfoo2-N (policy 8.1)."""
    if soname in GLIBC_SONAMES:
        return "libc6"
    if soname in _NAMED_OTHERWISE:
        return _NAMED_OTHERWISE[soname]
    stem, _, major = soname.partition(".so.")
    stem = stem.lower().replace("_", "-")
    return f"{stem}-{major}" if stem[-1:].isdigit() else f"{stem}{major}"


def package_of(soname: str, paths: dict[str, str]) -> str:
    """The Debian package that ships `soname` on this machine (dpkg -S), else the policy's name for it."""
    if soname in GLIBC_SONAMES:
        return "libc6"
    path = paths.get(soname)
    if path:
        real = str(Path(path).resolve())
        for candidate in dict.fromkeys((path, real, re.sub(r"^/usr/lib/", "/lib/", real),
                                        re.sub(r"^/lib/", "/usr/lib/", real))):
            proc = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if proc.returncode == 0:
                return proc.stdout.split(":", 1)[0].strip()
    return by_convention(soname)


def debian_depends(bundle: Path) -> list[str]:
    """`libc6 (>= FLOOR)` and the package of every library the bundle needs but does not carry, sorted."""
    files = elf_files(bundle)
    paths = _ldconfig()
    packages = {package_of(n, paths) for n in external_needed(bundle, files)}
    packages.discard("libc6")
    floor = glibc_floor(files)
    return [f"libc6 (>= {floor})" if floor else "libc6", *sorted(packages)]
