"""How this desk reaches its Docker engine, judged from DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH:
what a link that anyone on the network could use is warned about, and why a remote engine did not answer
(ssh, TLS, refused, unknown host), each with its fix. A remote engine's failure never says "install Docker"."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

LOCAL_SOCKET = "unix:///var/run/docker.sock"
RUNSC_HINT = ("register gVisor with the engine: `make engine RUNSC=1` (an engine it starts), or `sudo runsc install "
              "&& sudo systemctl restart docker`; or leave \"runtime\" out of the project's settings")


@dataclass(frozen=True, slots=True)
class EngineLink:
    """The engine's address as written, its scheme, host and port, and whether the link is encrypted (TLS or
    ssh) and the engine's certificate verified."""

    address: str
    scheme: str
    host: str = ""
    port: int | None = None
    tls: bool = False
    verified: bool = False

    @property
    def remote(self) -> bool:
        return self.scheme in ("tcp", "ssh", "http", "https")

    @property
    def loopback(self) -> bool:
        if self.host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    def warning(self) -> tuple[str, str]:
        """(what is wrong, the fix) for a link another machine could listen to or take over; ("", "") if none."""
        if self.scheme not in ("tcp", "http") or self.loopback:
            return "", ""
        where = f"{self.host}:{self.port}" if self.port else self.host
        if not self.tls:
            return (f"the engine at {self.address} is reached over plain tcp: unencrypted and unauthenticated, so "
                    f"anyone who can reach {where} runs containers as root there and reads every workspace sent",
                    "turn on TLS (dockerd --tlsverify; here DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH), or use "
                    "DOCKER_HOST=ssh://user@host")
        if not self.verified:
            return (f"the engine at {self.address} is reached over TLS without checking its certificate "
                    "(DOCKER_CERT_PATH is set, DOCKER_TLS_VERIFY is not): anyone in between can pose as the engine",
                    "export DOCKER_TLS_VERIFY=1 (DOCKER_CERT_PATH must hold the engine's ca.pem)")
        return "", ""


def engine_link(address: str | None = None, env: Mapping[str, str] | None = None) -> EngineLink:
    """The link DOCKER_HOST (or `address`) names, with the TLS settings the docker SDK reads from `env`."""
    env = os.environ if env is None else env
    address = (address or env.get("DOCKER_HOST", "") or LOCAL_SOCKET).strip()
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is not a number: the SDK refuses it with its own message
        host, port = parts.hostname or "", None
    verify = env.get("DOCKER_TLS_VERIFY", "") != ""  # the SDK's reading: any non-empty value turns it on
    tls = scheme == "https" or (scheme == "tcp" and (verify or bool(env.get("DOCKER_CERT_PATH"))))
    return EngineLink(address, scheme, host, port, tls=tls or scheme == "ssh",
                      verified=(scheme == "ssh") or (tls and verify))


_SSH_CAUSES = (
    ("not found in known_hosts", "the host key of {host} is not in ~/.ssh/known_hosts",
     "connect once with `ssh {target}` and accept the host key after checking its fingerprint"),
    ("Authentication failed", "the ssh server at {host} refused the login",
     "check that `ssh {target} docker version` works without a password: a key in ssh-agent, or an "
     "IdentityFile in ~/.ssh/config"),
    ("No authentication methods available", "no ssh key was offered to {host}",
     "load a key into ssh-agent (ssh-add), or name an IdentityFile for the host in ~/.ssh/config"),
    ("Unable to connect to port", "nothing listens at {where}",
     "check that sshd runs on {host}, and the port in DOCKER_HOST (ssh://user@host:port)"),
    ("Connection refused", "nothing listens at {where}",
     "check that sshd runs on {host}, and the port in DOCKER_HOST (ssh://user@host:port)"),
    ("docker: not found", "the docker command is missing on {host}",
     "install the docker CLI on the build host (Debian: docker.io or docker-ce-cli) for the ssh user"),
)
_NET_CAUSES = (
    ("certificate verify failed", "the engine's TLS certificate is not signed by the CA in DOCKER_CERT_PATH",
     "put the CA that signed the engine's certificate in $DOCKER_CERT_PATH/ca.pem, and check that the "
     "certificate names the host you connect to"),
    ("certificate required", "the engine wants a client certificate and none was sent",
     "export DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH=<a folder with ca.pem, cert.pem and key.pem>"),
    ("unknown ca", "the engine does not trust this desk's client certificate",
     "use a client certificate signed by the CA the engine's --tlscacert names"),
    ("Path to a certificate and key files must be provided", "DOCKER_CERT_PATH lacks cert.pem or key.pem",
     "put cert.pem, key.pem and ca.pem in the folder DOCKER_CERT_PATH names"),
    ("HTTP request to an HTTPS server", "the engine at {where} speaks TLS, and this desk spoke plain HTTP",
     "export DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH=<a folder with ca.pem, cert.pem and key.pem>"),
    ("wrong version number", "the engine does not speak TLS there (a plain tcp:// listener?)",
     "unset DOCKER_TLS_VERIFY and DOCKER_CERT_PATH for a plain engine, or turn TLS on in dockerd"),
    ("Connection aborted", "the engine closed the connection (TLS expected? a proxy?)",
     "with TLS on the engine: export DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH"),
    ("Name or service not known", "the host name {host} is not known", "check the host name in DOCKER_HOST"),
    ("Temporary failure in name resolution", "the host name {host} could not be looked up",
     "check the network and the host name in DOCKER_HOST"),
    ("Connection refused", "nothing listens at {where}", "start dockerd there, or check the port in DOCKER_HOST"),
    ("timed out", "{where} did not answer in time", "check the network and any firewall between"),
    ("No route to host", "there is no route to {host}", "check the network and the host in DOCKER_HOST"),
)


def remote_failure(link: EngineLink, exc: BaseException) -> tuple[str, str]:
    """(the cause, the fix) of a remote engine's failure to answer, from the error and its causes."""
    texts = []
    seen: BaseException | None = exc
    while seen is not None and len(texts) < 6:
        texts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    text = " | ".join(texts)
    where = f"{link.host}:{link.port}" if link.port else link.host
    login = link.address.removeprefix("ssh://").rsplit(":", 1)[0] if link.port else link.address.removeprefix("ssh://")
    target = (f"-p {link.port} {login}" if link.port else login) if link.scheme == "ssh" else link.host
    fields = {"host": link.host, "where": where, "target": target}
    table = (_SSH_CAUSES + _NET_CAUSES) if link.scheme == "ssh" else _NET_CAUSES
    for marker, cause, fix in table:
        if marker.lower() in text.lower():
            return cause.format(**fields), fix.format(**fields)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    if link.scheme == "ssh":
        return (f"the ssh link to {link.host} failed ({type(exc).__name__}: {first})",
                f"check that `ssh {target} docker version` works from this machine")
    return f"{type(exc).__name__}: {first}", f"check DOCKER_HOST ({link.address}) and that dockerd runs there"
