"""The model worker process holds the API key only as data on its private socketpair: never on its command
line, in its environment, or on a socket path or port another local process could connect to."""

from __future__ import annotations

import os
from pathlib import Path

from desktop_app.core import ModelRequest, _model_worker
from desktop_app.core._anthropic import AnthropicModelClient
from tests.fakes.anthropic_server import AnthropicServer, reply, text

KEY = "sk-ant-worker-canary-0123456789abcdef"


async def test_the_key_is_on_no_command_line_environment_or_socket_path(server: AnthropicServer) -> None:
    server.api_key = KEY  # the fake server refuses any other key (401)
    server.add(reply(text("ok")))
    client = AnthropicModelClient(api_key=KEY, base_url=server.url, off_loop=True)
    try:
        got = await client.stream(ModelRequest(system="", messages=[{"role": "user", "content": "hi"}]),
                                  emit=lambda e: None)
        assert got.text == "ok"  # so the key went through the worker
        proc = _model_worker._PROCESS.proc
        assert proc is not None
        _check_worker(Path(f"/proc/{proc.pid}"))
    finally:
        await client.close()


def _check_worker(proc_dir: Path) -> None:
    for name in ("cmdline", "environ"):
        assert KEY.encode() not in (proc_dir / name).read_bytes(), name
    links = [os.readlink(fd) for fd in (proc_dir / "fd").iterdir()]
    inodes = {link.removeprefix("socket:[").rstrip("]") for link in links if link.startswith("socket:[")}
    assert inodes, "the worker talks over sockets"
    for table in ("unix", "tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if (fields[6] if table == "unix" else fields[9]) not in inodes:
                continue
            if table == "unix":  # a path or an abstract name (the 8th field) would be reachable
                assert len(fields) < 8, f"a named unix socket: {line}"
            else:  # its connection to the model endpoint, never a listening port
                assert fields[3] != "0A", f"a listening port: {line}"
