"""The allowlist mode's egress proxy on this machine: `proxy_overhead_ms`, one 1 MB download through the proxy
(a CONNECT tunnel, the bytes counted) minus the same download straight from the server (target: through is at
most 1.3x direct), `proxy_connect_p50_ms`, a CONNECT to a listed name answered (target: at most 5 ms), and
`proxy_loop_lag_max_ms`: how late a 1 ms timer on the proxy's event loop (the window's, in the desk) runs at worst
while a 1 MB download goes through it from another thread, as the sandbox's would (over 20 ms: the proxy should
have its own thread's loop).

Two yardsticks in C, measured in the same run when installed (`make bench` installs them): a CONNECT proxy,
tinyproxy (`proxy_ref_tinyproxy_ratio`), and a plain TCP forwarder with a 1 MB buffer and no CONNECT at all,
socat (`proxy_ref_socat_ratio`), each through vs direct in interleaved rounds of its own after the desk's: what
this machine's loopback costs any program in between, so a ratio over the target reads against them.
Local servers and the test resolver only: nothing leaves the machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from desktop_app.core import NetworkAllowlist
from desktop_app.sandbox._proxy import EgressProxy, ListOnlyGate

from ._util import p50, repeat, report

ROOT = Path(__file__).resolve().parent.parent
SIZE = 1024 * 1024
ROUNDS = 30
CONNECTS = 300


async def _download(host: str, port: int, *, via: tuple[str, int] | None = None, name: str = "good.test",
                    tunnel: bool = True) -> float:
    t0 = time.perf_counter()
    if via is None:
        reader, writer = await asyncio.open_connection(host, port)
    else:
        reader, writer = await asyncio.open_connection(*via)
    if via is not None and tunnel:
        writer.write(f"CONNECT {name}:{port} HTTP/1.1\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"200", head
    writer.write(f"GET /bytes/{SIZE} HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n".encode())
    got = len(await reader.read())
    writer.close()
    assert got > SIZE, got
    return (time.perf_counter() - t0) * 1000


async def _connect(proxy: EgressProxy, port: int) -> float:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(f"CONNECT good.test:{port} HTTP/1.1\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    took = (time.perf_counter() - t0) * 1000
    assert head.startswith(b"HTTP/1.1 200"), head
    writer.close()
    return took


async def _loop_lag(proxy: EgressProxy, port: int) -> tuple[float, float]:
    """(worst, p50) lateness of a 1 ms timer on this loop while a 1 MB download runs through the proxy from
    another thread's loop (the client is not on the measured loop, as the sandbox's is not)."""
    lags: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t0) * 1000 - 1.0)

    ticker = asyncio.ensure_future(tick())
    try:
        await asyncio.to_thread(asyncio.run, _download("127.0.0.1", port, via=proxy.address))
    finally:
        done.set()
        await ticker
    return max(lags), p50(lags)


async def _resolve(host: str, port: int) -> list[str]:
    """The test resolver's answer for the one name the benchmark uses."""
    if host != "good.test":
        raise OSError(f"the benchmark's resolver does not know {host}")
    return ["127.0.0.1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int, deadline_s: float = 5.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
        time.sleep(0.02)
    return False


@contextlib.contextmanager
def _yardsticks(port: int) -> Iterator[dict[str, tuple[tuple[str, int], bool]]]:
    """The C programs installed here, started on free ports: name -> (address, speaks CONNECT)."""
    found: dict[str, tuple[tuple[str, int], bool]] = {}
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if shutil.which("tinyproxy"):
                tp = _free_port()
                conf = Path(tmp) / "tinyproxy.conf"
                conf.write_text(f"Port {tp}\nListen 127.0.0.1\nTimeout 60\nMaxClients 64\nLogLevel Critical\n"
                                f"ConnectPort {port}\n")
                procs.append(subprocess.Popen(["tinyproxy", "-d", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
                if _listening(tp):
                    found["tinyproxy"] = (("127.0.0.1", tp), True)
            if shutil.which("socat"):
                sp = _free_port()
                procs.append(subprocess.Popen(["socat", "-b", str(SIZE), f"TCP-LISTEN:{sp},bind=127.0.0.1,fork",
                                               f"TCP:127.0.0.1:{port}"], stderr=subprocess.DEVNULL))
                if _listening(sp):
                    found["socat"] = (("127.0.0.1", sp), False)
            for name in ("tinyproxy", "socat"):
                if name not in found:
                    print(f"# proxy yardstick {name}: not installed or did not start (no figure)", flush=True)
            yield found
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)


async def _run(port: int) -> None:
    gate = ListOnlyGate(NetworkAllowlist.parse([f"good.test:{port}", "127.0.0.1"]))
    proxy = EgressProxy(gate, resolve=_resolve)
    await proxy.start("127.0.0.1", 0)
    try:
        direct, through = [], []
        for _ in range(ROUNDS):  # interleaved, so both see the same load
            direct.append(await _download("127.0.0.1", port))
            through.append(await _download("127.0.0.1", port, via=proxy.address))
        others: dict[str, float] = {}
        with _yardsticks(port) as sticks:  # after, each with direct rounds of its own: they leave the above alone
            for name, (address, tunnel) in sticks.items():
                mine, theirs = [], []
                for _ in range(ROUNDS):
                    mine.append(await _download("127.0.0.1", port))
                    theirs.append(await _download("127.0.0.1", port, via=address, name="127.0.0.1", tunnel=tunnel))
                others[name] = p50(theirs) / p50(mine)
        connects = [await _connect(proxy, port) for _ in range(CONNECTS)]
        lag = [await _loop_lag(proxy, port) for _ in range(10)]
    finally:
        await proxy.close()
    d, t = p50(direct), p50(through)
    report("proxy_direct_1mb_ms", d, "ms")
    report("proxy_through_1mb_ms", t, "ms")
    report("proxy_overhead_ms", t - d, "ms")
    report("proxy_overhead_ratio", t / d, "x")
    for name, ratio in others.items():
        report(f"proxy_ref_{name}_ratio", ratio, "x")
    report("proxy_connect_p50_ms", p50(connects), "ms")
    report("proxy_loop_lag_max_ms", max(w for w, _ in lag), "ms")
    report("proxy_loop_lag_p50_ms", p50([m for _, m in lag]), "ms")


def main() -> None:
    # the server in a process of its own (benchmarks/_net_server.py), as a real one costs the desk nothing but
    # sockets; the client on the proxy's loop, so its work counts against the proxy's
    server = subprocess.Popen([sys.executable, "-m", "benchmarks._net_server"], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        repeat(lambda: asyncio.run(_run(port)), runs=3)  # a loopback megabyte is noisy: the median of three
    finally:
        server.communicate("", timeout=30)
