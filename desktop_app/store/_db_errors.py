"""What a database error means to the person, per database: each StoreError names the database (never its
password) and gives the fix for that database, so SQLite's file hints never reach a PostgreSQL user, nor the
reverse."""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from desktop_app.core import StoreError

POSTGRES_EXTRA = "install the PostgreSQL driver: pip install 'agent-desk[postgres]' (psycopg 3)"
_SECRET_PARAMS = {"password", "passwd", "sslpassword"}
_USERINFO_PASSWORD = re.compile(r"(://[^:/?#@\s]*):[^@/?#\s]*@")


def safe_url(url: str) -> str:
    """`url` for a message or a log: its password, and any password given as a query parameter, masked."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        masked = _USERINFO_PASSWORD.sub(r"\1:***@", url)
        return re.sub(r"(?i)((?:ssl)?passw(?:or)?d=)[^&\s]*", r"\1***", masked)
    query = {k: ("***" if k.lower() in _SECRET_PARAMS else v) for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def driver_missing(url: str, exc: BaseException) -> StoreError:
    """The URL names a database whose driver is not installed (or a dialect SQLAlchemy does not know)."""
    where = safe_url(url)
    if url.startswith("postgres"):
        return StoreError(f"cannot use the PostgreSQL database {where}: its driver is not installed ({exc})",
                          hint=POSTGRES_EXTRA + ", and write the URL as postgresql+psycopg://user@host/db")
    return StoreError(f"cannot use the database {where}: {exc}",
                      hint="use a SQLite file path, or a URL such as postgresql+psycopg://user@host/agent_desk")


def _pg_kind(exc: BaseException) -> tuple[str, str] | None:
    """(kind, the server's first line) of a PostgreSQL error, by SQLSTATE where the driver gives one."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None) or ""
    first = (str(orig).strip().splitlines() or [""])[0]
    low = str(orig).lower()
    checks = (
        ("database", state == "3D000" or re.search(r'database "[^"]*" does not exist', low)),
        ("credentials", state in ("28P01", "28000") or "password authentication failed" in low
         or "no password supplied" in low or "pg_hba.conf" in low or re.search(r'role "[^"]*" does not exist', low)
         or "is not permitted to log in" in low or "authentication failed" in low),
        ("tls", "ssl" in low and ("certificate" in low or "ssl error" in low or "server does not support ssl" in low
                                  or "sslmode" in low or "root certificate file" in low or "tlsv1 alert" in low)),
        ("read-only", state == "25006" or "read-only transaction" in low),
        ("locked", state in ("55P03", "40P01") or "lock timeout" in low or "deadlock detected" in low),
        ("full", state in ("53100", "53000") or "no space left" in low or "could not extend file" in low),
        ("permission", state == "42501" or "permission denied" in low),
        ("unreachable", "connection refused" in low or "could not connect" in low or "timeout expired" in low
         or "no such file or directory" in low or "could not translate host name" in low
         or "server closed the connection" in low or "connection is lost" in low or "connection failed" in low),
    )
    for kind, hit in checks:
        if hit:
            return kind, first
    return None


def _pg_hint(kind: str, url: str, busy_timeout_ms: int) -> tuple[str, str]:
    u = make_url(url)
    host = u.host or u.query.get("host") or "localhost"
    name = u.database or "(none)"
    return {
        "database": (f"the database {name!r} does not exist on the PostgreSQL server at {host}",
                     f"create it (createdb -h {host} {name}, or CREATE DATABASE \"{name}\"), or fix its name"),
        "credentials": (f"the PostgreSQL server at {host} refused the user {u.username or '(default)'!r}",
                        "check the user and password (in the URL, PGPASSWORD or ~/.pgpass), that the role may log "
                        "in (ALTER ROLE … LOGIN), and the server's pg_hba.conf"),
        "tls": (f"the TLS handshake with the PostgreSQL server at {host} failed",
                "check sslmode and sslrootcert in the URL (the CA that signed the server's certificate), and that "
                "the server has ssl = on; verify-full also needs the host name in the server's certificate"),
        "read-only": (f"the PostgreSQL database {name!r} at {host} is read-only (a standby, or "
                      "default_transaction_read_only)", "point --db at the primary server, or make it writable"),
        "locked": (f"another session holds a lock on the PostgreSQL database {name!r} at {host} "
                   f"(waited {busy_timeout_ms} ms)",
                   "find the session in pg_stat_activity and end its transaction, then retry"),
        "full": (f"the disk of the PostgreSQL server at {host} is full", "free space on the database server"),
        "permission": (f"the PostgreSQL user {u.username or '(default)'!r} lacks a privilege on {name!r}",
                       "grant the user the audit tables (or make it the database's owner)"),
        "unreachable": (f"the PostgreSQL server at {host} does not answer (no server listens there)",
                        "start the server, or check the host and port in the URL (and any firewall between)"),
    }[kind]


def postgres_error(exc: BaseException, doing: str, url: str, busy_timeout_ms: int) -> StoreError | None:
    """A StoreError for a PostgreSQL failure this module knows, or None to let the caller word it."""
    found = _pg_kind(exc)
    if found is None:
        return None
    kind, first = found
    what, hint = _pg_hint(kind, url, busy_timeout_ms)
    kept = "; earlier records are safe, this write was not saved" if doing.startswith("could not save") else ""
    return StoreError(f"{doing}: {what} ({first}){kept}", hint=hint)


def sqlite_open_error(exc: BaseException, where: str) -> StoreError:
    """A SQLite file that cannot be opened or migrated."""
    low = str(getattr(exc, "orig", None) or exc).lower()
    if "readonly" in low or "read-only" in low:
        hint = "the file or its folder is read-only: make both writable, or point --db at another path"
    elif "not a database" in low or "malformed" in low:
        hint = "the file is damaged or is not an audit database: move it aside and reopen"
    else:
        hint = "check the path and permissions, or move a damaged file aside"
    return StoreError(f"cannot open the audit database {where}: {exc}", hint=hint)
