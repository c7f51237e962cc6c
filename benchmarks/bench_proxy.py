"""The allowlist mode's egress proxy on this machine: `proxy_overhead_ms`, one 1 MB download through the proxy
(a CONNECT tunnel, the bytes counted) minus the same download straight from the server (target: through is at
most 1.3x direct), `proxy_connect_p50_ms`, a CONNECT to a listed name answered (target: at most 5 ms), and
`proxy_loop_lag_max_ms`: how late a 1 ms timer on the proxy's event loop (the window's, in the desk) runs at worst
while a 1 MB download goes through it from another thread, as the sandbox's would (over 20 ms: the proxy should
have its own thread's loop).
Local servers and the test resolver only: nothing leaves the machine."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from desktop_app.core import NetworkAllowlist
from desktop_app.sandbox._proxy import EgressProxy, ListOnlyGate

from ._util import p50, report

ROOT = Path(__file__).resolve().parent.parent
SIZE = 1024 * 1024
ROUNDS = 30
CONNECTS = 300


async def _download(host: str, port: int, *, via: tuple[str, int] | None = None) -> float:
    t0 = time.perf_counter()
    if via is None:
        reader, writer = await asyncio.open_connection(host, port)
    else:
        reader, writer = await asyncio.open_connection(*via)
        writer.write(f"CONNECT good.test:{port} HTTP/1.1\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
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


async def _run(port: int) -> None:
    gate = ListOnlyGate(NetworkAllowlist.parse([f"good.test:{port}", "127.0.0.1"]))
    proxy = EgressProxy(gate, resolve=_resolve)
    await proxy.start("127.0.0.1", 0)
    try:
        direct, through = [], []
        for _ in range(ROUNDS):  # interleaved, so both see the same load
            direct.append(await _download("127.0.0.1", port))
            through.append(await _download("127.0.0.1", port, via=proxy.address))
        connects = [await _connect(proxy, port) for _ in range(CONNECTS)]
        lag = [await _loop_lag(proxy, port) for _ in range(10)]
    finally:
        await proxy.close()
    d, t = p50(direct), p50(through)
    report("proxy_direct_1mb_ms", d, "ms")
    report("proxy_through_1mb_ms", t, "ms")
    report("proxy_overhead_ms", t - d, "ms")
    report("proxy_overhead_ratio", t / d, "x")
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
        asyncio.run(_run(int(server.stdout.readline())))
    finally:
        server.communicate("", timeout=30)
