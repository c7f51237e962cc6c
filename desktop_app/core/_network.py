"""A project's network allowlist: the domain patterns (and presets) its sandbox may reach through the desk's
proxy, and one connection through that proxy as evidence. Pure data: the proxy and the gate use it."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._errors import ConfigError

ALLOWLIST_SETTING = "network_allow"  # the project setting that holds the patterns (with "network": "allowlist")
DEFAULT_PORTS = (80, 443)

# Presets, named with @: what the package tools of each ecosystem fetch from, and nothing more.
PRESETS: dict[str, tuple[str, ...]] = {
    "python": ("pypi.org", "files.pythonhosted.org"),
    "node": ("registry.npmjs.org", "registry.yarnpkg.com"),
    "debian": ("deb.debian.org", "security.debian.org"),
    "github": ("github.com", "api.github.com", "codeload.github.com", "raw.githubusercontent.com",
               "objects.githubusercontent.com"),
}

NETWORK_PRESETS = PRESETS  # the name the package exports

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_DOMAIN = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})+\Z")
_SINGLE = re.compile(rf"{_LABEL}\Z")  # "localhost"-like names: only as written, never a wildcard


def _bad(pattern: object, why: str) -> ConfigError:
    return ConfigError(f"the {ALLOWLIST_SETTING} setting has a malformed pattern {str(pattern)[:80]!r}: {why}",
                       hint='write a domain ("pypi.org"), a wildcard of its subdomains ("*.pythonhosted.org"), an '
                       'address ("10.0.0.5", "10.0.0.0/24"), each maybe with ports (":443" or ":80,443"), or a '
                       f"preset ({', '.join('@' + p for p in PRESETS)}); the sandbox has no network until it is fixed")


@dataclass(frozen=True, slots=True)
class NetPattern:
    """One pattern: an exact domain, `*.domain` (its subdomains, not itself) or an address or network, and its
    ports (DEFAULT_PORTS when none is written)."""

    host: str  # lower case; "*.example.org"; or an address / network in its canonical text
    ports: tuple[int, ...] = DEFAULT_PORTS
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    @classmethod
    def parse(cls, text: object) -> NetPattern:
        if not isinstance(text, str) or not text.strip():
            raise _bad(text, "a pattern is a non-empty string")
        raw = text.strip().lower()
        host, ports = raw, DEFAULT_PORTS
        bracket = raw.startswith("[")
        if bracket:  # [v6]:port
            end = raw.find("]")
            if end < 0:
                raise _bad(text, "an IPv6 address in brackets needs its closing ]")
            host, rest = raw[1:end], raw[end + 1:]
            if rest:
                ports = _ports(text, rest.removeprefix(":")) if rest.startswith(":") else _fail(text, "after ]")
        elif raw.count(":") == 1:
            host, port_text = raw.split(":")
            ports = _ports(text, port_text)
        net = _network(host)
        if net is not None:
            return cls(str(net.network_address) if net.num_addresses == 1 else str(net), ports, net)
        if bracket or ":" in host:
            raise _bad(text, "not an address")
        if not (_DOMAIN.match(host) or _SINGLE.match(host)):
            if host in ("*", "*.") or (host.startswith("*.") and _SINGLE.match(host[2:])):
                over = "everything" if host in ("*", "*.") else f"every site under .{host[2:]}"
                raise _bad(text, f"a wildcard over {over} (a list names sites: *.example.org for one of them and "
                                 "its subdomains; the network mode `on` is the whole network)")
            raise _bad(text, "not a domain name (letters, digits, hyphens, dots; * only as the first label)")
        return cls(host, ports)

    def admits_name(self, name: str, port: int) -> bool:
        if self.network is not None or port not in self.ports:
            return False
        if self.host.startswith("*."):
            return name.endswith(self.host[1:]) and name != self.host[2:]
        return name == self.host

    def admits_address(self, address: str, port: int | None = None) -> bool:
        """Whether the address is listed (for an IP literal, or a name that resolves to a private one)."""
        if self.network is None or (port is not None and port not in self.ports):
            return False
        try:
            return ipaddress.ip_address(address) in self.network
        except ValueError:
            return False


def _fail(text: object, where: str) -> tuple[int, ...]:
    raise _bad(text, f"unexpected text {where}")


def _ports(text: object, spec: str) -> tuple[int, ...]:
    out = []
    for part in spec.split(","):
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise _bad(text, f"{part!r} is not a port (1-65535)")
        out.append(int(part))
    return tuple(sorted(set(out)))


def _network(host: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(host, strict=True)
    except ValueError:
        if "/" in host:
            raise _bad(host, "not a network (write its first address: 10.0.0.0/24)") from None
        return None


@dataclass(frozen=True, slots=True)
class NetworkAllowlist:
    """The patterns a project lists (presets expanded), and the entries as written."""

    patterns: tuple[NetPattern, ...] = ()
    written: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[object] | None) -> NetworkAllowlist:
        """From the setting's list; a malformed entry or an unknown preset is a ConfigError naming the setting."""
        if entries is None:
            return cls()
        if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
            raise _bad(entries, "the setting is a list of patterns")
        patterns: list[NetPattern] = []
        for entry in entries:
            if isinstance(entry, str) and entry.strip().startswith("@"):
                name = entry.strip()[1:].lower()
                if name not in PRESETS:
                    raise _bad(entry, f"no such preset (there are {', '.join('@' + p for p in PRESETS)})")
                patterns += [NetPattern.parse(p) for p in PRESETS[name]]
            else:
                patterns.append(NetPattern.parse(entry))
        return cls(tuple(patterns), tuple(str(e).strip() for e in entries))

    def with_patterns(self, more: Iterable[str]) -> NetworkAllowlist:
        extra = tuple(NetPattern.parse(p) for p in more)
        return NetworkAllowlist(self.patterns + extra, self.written + tuple(more))

    def admits_name(self, name: str, port: int) -> bool:
        return any(p.admits_name(name.lower().rstrip("."), port) for p in self.patterns)

    def admits_address(self, address: str, port: int | None = None) -> bool:
        return any(p.admits_address(address, port) for p in self.patterns)


# A repository may propose domains only: no address (they reach this machine's networks past the rebinding check),
# no wildcard over a suffix many strangers register under, no punycode (a name that can look like another).
_SHARED_SUFFIXES = frozenset({
    "github.io", "gitlab.io", "githubusercontent.com", "herokuapp.com", "appspot.com", "cloudfront.net",
    "amazonaws.com", "azurewebsites.net", "blob.core.windows.net", "vercel.app", "netlify.app", "pages.dev",
    "workers.dev", "ngrok.io", "ngrok-free.app", "trycloudflare.com", "blogspot.com", "firebaseapp.com",
    "web.app", "glitch.me", "repl.co", "fly.dev", "onrender.com", "duckdns.org", "no-ip.org",
})
_SECOND_LEVEL = frozenset({"co", "com", "org", "net", "gov", "ac", "edu", "ne", "or", "go", "ltd", "plc"})


def repository_refusal(entry: object) -> str | None:
    """Why a pattern cannot come from a repository's list, or None. Malformed patterns are ConfigErrors of
    `NetworkAllowlist.parse`; here a well-formed one that widens too much for a file the agent or a cloned
    repository can write: the person can still list it in their own settings."""
    if isinstance(entry, str) and entry.strip().startswith("@"):
        return None  # a preset: the desk's own list
    pattern = NetPattern.parse(entry)
    if pattern.network is not None:
        return "an address or network (it can reach this machine's own networks)"
    host = pattern.host
    if any(label.startswith("xn--") for label in host.removeprefix("*.").split(".")):
        return "an internationalised (punycode) name, which can look like another"
    if host.startswith("*."):
        base = host[2:]
        labels = base.split(".")
        if base in _SHARED_SUFFIXES:
            return f"a wildcard over {base}, where anyone can have a name"
        if len(labels) == 2 and labels[0] in _SECOND_LEVEL and len(labels[1]) == 2:
            return f"a wildcard over {base}, a suffix under which anyone registers"
    if "." not in host:
        return "a single-label name (a machine of the local network)"
    return None


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def is_public(address: str) -> bool:
    """False for loopback, private, link-local, multicast, reserved and unspecified addresses (and their
    IPv4-mapped IPv6 forms): a public name that resolves to one of them is a rebinding."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(slots=True)
class NetworkConnection:
    """One connection the sandbox asked the proxy for: the evidence recorded in the audit."""

    domain: str
    port: int
    started_at: float
    verdict: str = "refused"  # "allowed" or "refused"
    reason: str = ""  # why: "listed", "answered: once", "not listed (strict)", "rebinding to 10.0.0.5", ...
    address: str = ""  # the address the proxy connected to (it resolved the name itself)
    bytes_up: int = 0  # from the sandbox to the server
    bytes_down: int = 0
    ended_at: float | None = None
    method: str = "CONNECT"  # CONNECT (a tunnel: TLS passes through) or the plain HTTP method
    peer: str = ""  # the sandbox's address the request came from
    calls: list[str] = field(default_factory=list)  # the calls executing when it started (see `attribution`)
    attribution: str = ""  # "the one call executing", "one of N calls executing", "no call was executing"

    def to_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "port": self.port, "verdict": self.verdict, "reason": self.reason,
                "address": self.address, "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
                "started_at": self.started_at, "ended_at": self.ended_at, "method": self.method,
                "peer": self.peer, "calls": list(self.calls), "attribution": self.attribution}

    def summary(self) -> str:
        """One line for the call's trail: "pypi.org:443 allowed (listed): 1.2 KB up, 300 KB down"."""
        line = f"network: {self.domain}:{self.port} {self.verdict} ({self.reason})"
        if self.verdict == "allowed":
            line += f": {self.bytes_up:,} B up, {self.bytes_down:,} B down"
        return line
