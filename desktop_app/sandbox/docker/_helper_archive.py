"""The helper as shipped to a container: one zipapp of `helper/` built in memory, and the bootstrap
command that writes it to the container's /tmp and runs it (or says NOPYTHON when there is no python3)."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import zipfile
from importlib import resources

from ...core import glob_regex
from .. import helper

HELPER_DIR = "/tmp/.agent-desk"  # /tmp is the container's own tmpfs
NO_PYTHON = "NOPYTHON"
NOT_WRITTEN = "NOHELPERFILE"
# The archive's own __main__: run the package's entry point.
_STUB = b"from helper.__main__ import main\n\nmain()\n"
# $1 the writer below, $2 the archive's path, $3 the workspace, $4 the desk's door ("" for none: see
# _helper_door.py), then the archive's base64 in pieces (one
# argument may hold at most 128 KiB: MAX_ARG_STRLEN). Written on every start
# (cheap on tmpfs, and a file a command changed is replaced), to a temp name renamed into place: two
# helpers starting at once never see half a file. Python writes it, so nothing but python3 is needed.
_WRITE = (
    "import binascii, os, sys; p = sys.argv[1]; t = '%s.%d.tmp' % (p, os.getpid())\n"
    "os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)\n"
    "with open(t, 'wb') as fh: fh.write(binascii.a2b_base64(''.join(sys.argv[2:])))\n"
    "os.replace(t, p)"
)
_BOOT = (
    f"command -v python3 >/dev/null 2>&1 || {{ echo {NO_PYTHON}; exit 0; }}\n"
    'w=$1; p=$2; root=$3; door=$4; shift 4\n'
    f'python3 -I -S -c "$w" "$p" "$@" || {{ echo {NOT_WRITTEN}; exit 0; }}\n'
    'exec python3 -I -S "$p" "$root" "$door"'
)
_PIECE = 96 * 1024  # characters of base64 per argument


def _glob_source() -> bytes:
    """core's glob module, as it is: the container has no desktop_app to re-export it from."""
    package, _, module = glob_regex.__module__.rpartition(".")
    return resources.files(package).joinpath(f"{module}.py").read_bytes()


@functools.cache
def helper_archive() -> bytes:
    """The zipapp: deterministic bytes, ZIP_STORED (python3-minimal needs no zlib to read it)."""
    files = {"__main__.py": _STUB}
    for entry in sorted(resources.files(helper).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py") and entry.name != "glob.py":
            files[f"helper/{entry.name}"] = entry.read_bytes()
    files["helper/glob.py"] = _glob_source()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3  # unix, whatever the host
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return out.getvalue()


def helper_command(root: str, door: str = "") -> list[str]:
    """argv of the `docker exec` that starts the helper on workspace `root`, told to connect to the desk's socket
    at `door` (a path in the container) when there is one."""
    archive = helper_archive()
    path = f"{HELPER_DIR}/helper-{hashlib.sha256(archive).hexdigest()[:16]}.pyz"
    b64 = base64.b64encode(archive).decode("ascii")
    pieces = [b64[i : i + _PIECE] for i in range(0, len(b64), _PIECE)]
    return ["/bin/sh", "-c", _BOOT, "agent-desk-helper", _WRITE, path, root, door, *pieces]
