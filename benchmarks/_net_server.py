"""The allowlist tests' local servers (tests/kit/netservers.py) in a process of their own, for the proxy's
benchmark: in the benchmark's process the server's threads would take the GIL from the loop being measured,
where a real server costs the desk nothing but sockets. `python -m benchmarks._net_server` prints the plain
HTTP server's port and serves until its stdin closes."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main() -> int:
    from tests.kit.netservers import local_servers

    with tempfile.TemporaryDirectory() as tmp, local_servers(Path(tmp)) as servers:
        print(servers.http_port, flush=True)
        sys.stdin.read()  # until the benchmark closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
