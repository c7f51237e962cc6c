"""A throwaway PostgreSQL server for the tests: initdb into a temp folder, started as a non-root user on a
Unix socket in that folder (no TCP port), one database per caller, stopped and removed at the end.

`make test` needs nothing running: the first test that asks for PostgreSQL starts it. The programs come
from PATH, else from Debian's packaging (/usr/lib/postgresql/<version>/bin); `make postgres-tools` installs
Debian's `postgresql` when neither has them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

PG_USER = "agentdesk"  # the database superuser initdb creates (not an OS account)
RUN_AS = "nobody"  # PostgreSQL refuses to run as root


def pg_bin(name: str) -> str | None:
    """The program `name` (initdb, pg_ctl, postgres, psql): on PATH, else Debian's newest version."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


class PostgresServer:
    """One server for the test session; `database()` gives each caller a fresh, empty database."""

    def __init__(self, keep: Path | None = None, tcp_port: int | None = None) -> None:
        """`keep`: a folder whose server (data and socket) outlives this object, for a benchmark's fixture
        built once: made on the first start, reused by the next ones, never removed by `stop`. `tcp_port`:
        also listen on 127.0.0.1:PORT (plain, no TLS), for what only a TCP connection shows."""
        missing = [n for n in ("initdb", "pg_ctl", "postgres") if pg_bin(n) is None]
        if missing:
            raise RuntimeError(
                f"PostgreSQL programs not found: {', '.join(missing)} (run `make postgres-tools` as root, "
                "or install Debian's postgresql package)"
            )
        self._keep = keep is not None
        self.dir = Path(tempfile.mkdtemp(prefix="agent-desk-pg-")) if keep is None else keep
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data = self.dir / "data"
        self.socket_dir = self.dir  # the socket path must stay under 107 bytes: a short temp path
        self._as_user = os.geteuid() == 0
        if self._as_user:
            ids = pwd.getpwnam(RUN_AS)
            os.chown(self.dir, ids.pw_uid, ids.pw_gid)
        self._started = False
        self.tcp_port = tcp_port

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {"user": RUN_AS, "group": "nogroup", "extra_groups": []} if self._as_user else {}
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=self.dir, **kwargs)

    def start(self) -> PostgresServer:
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        self._pg_start()
        return self

    def _initdb(self) -> None:
        done = self._run(pg_bin("initdb") or "initdb", "-D", str(self.data), "-U", PG_USER, "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")

    def _pg_start(self) -> None:
        # Durability settings off: a test server's data is thrown away, and fsync dominates on a loaded disk.
        listen = f"127.0.0.1 -p {self.tcp_port}" if self.tcp_port else "''"
        options = (f"-k {self.socket_dir} -c listen_addresses={listen} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=200")
        done = self._run(pg_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"),
                         "-o", options, "-w", "-t", "60", "start")
        if done.returncode:
            server_log = self.dir / "server.log"
            log = server_log.read_text(errors="replace")[-2000:] if server_log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()}\n{log}")
        self._started = True

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """A SQLAlchemy URL to `database` over the server's socket."""
        return f"{driver}://{PG_USER}@/{database}?host={self.socket_dir}"

    def database(self, prefix: str = "t", name: str | None = None) -> str:
        """Create a fresh database (named `name`, else a random one); return its SQLAlchemy URL."""
        import psycopg

        name = name or f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(host=str(self.socket_dir), user=PG_USER, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self._started:
            mode = "fast" if self._keep else "immediate"  # a kept server shuts down cleanly
            self._run(pg_bin("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
            self._started = False
        if self._keep:
            return
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)
