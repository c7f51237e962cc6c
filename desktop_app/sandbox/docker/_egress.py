"""The allowlist network mode of a Docker sandbox. The container has no network at all (network "none": no
route, no DNS, not even to this machine's services); its only way out is the desk's egress proxy, listening on
a unix socket in a folder mounted into the container read-only. A small relay in the container (stdlib python)
turns 127.0.0.1:3128, which HTTP(S)_PROXY name, into that socket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import tempfile
import time
from pathlib import Path

from ...core import NetworkAllowlist
from .._proxy import EgressProxy, ListOnlyGate, NetworkGate, Resolver, system_resolver

log = logging.getLogger(__name__)

RELAY_PORT = 3128
CONTAINER_DIR = "/run/agent-desk/egress"
SOCKET_NAME = "proxy.sock"
NO_PROXY = "localhost,127.0.0.1,::1"
SETTING = 'the network setting "allowlist"'

# Runs in the container as the sandbox's user: stdlib only, one thread per direction.
RELAY = f"""
import os, socket, sys, threading
SOCK = {CONTAINER_DIR + "/" + SOCKET_NAME!r}
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    srv.bind(("127.0.0.1", {RELAY_PORT}))
except OSError as e:
    print("busy", e, flush=True)
    sys.exit(3)
srv.listen(128)
print("ready", os.getpid(), flush=True)
def pipe(a, b):
    try:
        while True:
            d = a.recv(262144)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass
DOWN = ("agent-desk: the desk's network proxy is not running ({{}}): this sandbox has no way out until the desk "
        "runs again\\n")
def refuse(c, why):
    # the request is read first, so the answer is not lost to a reset; then the client's end is awaited
    body = DOWN.format(why).encode()
    try:
        c.settimeout(5)
        c.recv(65536)
        head = ("HTTP/1.1 502 Bad Gateway\\r\\nContent-Type: text/plain; charset=utf-8\\r\\n"
                "X-Agent-Desk-Proxy: down\\r\\nConnection: close\\r\\nContent-Length: " + str(len(body)))
        c.sendall(head.encode() + b"\\r\\n\\r\\n" + body)
        c.shutdown(socket.SHUT_WR)
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(SOCK)
    except OSError as e:
        u.close()
        refuse(c, e.strerror or type(e).__name__)
        return
    t = threading.Thread(target=pipe, args=(u, c), daemon=True)
    t.start()
    pipe(c, u)
    t.join()
    c.close()
    u.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{RELAY_PORT}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


STALE_AFTER_S = 60.0  # a folder younger than this may be another desk's, between its mkdir and its listen
_swept = False  # the stale folders are swept once per process, at the first proxy's start


def egress_root() -> Path:
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or Path(tempfile.gettempdir()) / f"agent-desk-{os.getuid()}")
    return base / "agent-desk-egress"


def egress_dir(slug: str) -> Path:
    """This machine's folder for one project's proxy socket: under XDG_RUNTIME_DIR (else a folder of this user's
    in the temp dir), made here, owned by this user, never a link."""
    root = egress_root()
    base = root.parent
    for folder, mode in ((base, 0o700), (root, 0o700), (root / slug, 0o755)):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=mode)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(f"{folder} is not a folder of this user's")
        if folder != base:
            folder.chmod(mode)  # the container's user (another uid) goes through the last one, read-only
    return root / slug


def _listening(sock: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(0.5)
    try:
        probe.connect(str(sock))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def sweep_stale(keep: str = "", *, older_than_s: float = STALE_AFTER_S) -> list[str]:
    """Remove the proxy folders no desk serves (no socket, or one nobody listens on), older than `older_than_s`,
    of this user's, never through a link; `keep` is the caller's own. Returns the names removed. A container
    kept running with a removed folder is made again at its next start (the folder's inode is in its hash)."""
    root = egress_root()
    removed: list[str] = []
    try:
        children = list(root.iterdir())
    except OSError:
        return removed
    now = time.time()
    for child in children:
        try:
            st = child.lstat()
            if child.name == keep or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or \
                    now - st.st_mtime < older_than_s or _listening(child / SOCKET_NAME):
                continue
            with contextlib.suppress(FileNotFoundError):
                (child / SOCKET_NAME).unlink()
            child.rmdir()  # anything else in it: not the desk's folder, left alone
            removed.append(child.name)
        except OSError:
            continue
    if removed:
        log.info("removed %d stale proxy folder(s) under %s", len(removed), root)
    return removed


class SandboxEgress:
    """A sandbox's proxy: listening before its container is made, closed with the sandbox. A proxy that cannot
    start leaves `problem` set, and the container with no network at all (never a full one)."""

    def __init__(self, allowlist: NetworkAllowlist, slug: str) -> None:
        self.gate: NetworkGate = ListOnlyGate(allowlist)
        self.resolver: Resolver | None = None  # tests map their names to local servers
        self.slug = slug
        self.folder: Path | None = None
        self.problem = ""
        self.proxy: EgressProxy | None = None

    async def start(self) -> None:
        """Listen on the project's socket (made again: a socket left by an earlier desk is replaced)."""
        global _swept
        if self.proxy is not None:
            return
        if not _swept:
            _swept = True
            await asyncio.to_thread(sweep_stale, self.slug)
        proxy = EgressProxy(self.gate, resolve=self.resolve)
        try:
            folder = egress_dir(self.slug)
            sock = folder / SOCKET_NAME
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
            await proxy.start_unix(str(sock))
            sock.chmod(0o666)  # the container's user may differ from the desk's; the folder holds only this
        except OSError as exc:
            self.problem = f"{SETTING}: the desk's proxy could not start ({exc.strerror or exc}); the sandbox has " \
                           "no network"
            log.warning("%s", self.problem)
            await proxy.close()
            return
        self.folder, self.proxy, self.problem = folder, proxy, ""

    def refuse(self, why: str) -> None:
        """The proxy cannot serve this sandbox (`why`): it has no network at all."""
        self.problem = f"{SETTING}: {why}; the sandbox has no network"
        log.warning("%s", self.problem)

    async def resolve(self, host: str, port: int) -> list[str]:
        """The names the proxy resolves: with `resolver` when set (looked up at each name), else the system's."""
        return await (self.resolver or system_resolver)(host, port)

    async def close(self, *, keep_folder: bool = False) -> None:
        """Stop listening; the socket goes, and the folder too unless its container keeps running (it holds the
        folder mounted: the next desk listens in it again)."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.close()
        folder = self.folder
        if folder is not None:
            with contextlib.suppress(OSError):
                (folder / SOCKET_NAME).unlink()
                if not keep_folder:
                    folder.rmdir()
