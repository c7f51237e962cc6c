"""The allowlist's patterns: domains, wildcards, addresses, ports, presets; a malformed one names the setting."""

from __future__ import annotations

import pytest

from desktop_app.core import ConfigError, NetworkAllowlist, NetworkConnection, is_public
from desktop_app.core._network import PRESETS, NetPattern


def test_exact_wildcard_and_ports() -> None:
    allow = NetworkAllowlist.parse(["pypi.org", "*.pythonhosted.org:443", "api.example.org:8443,9000"])
    assert allow.admits_name("pypi.org", 443) and allow.admits_name("PyPI.org.", 80)
    assert not allow.admits_name("pypi.org", 8080)  # default ports are 80 and 443 only
    assert not allow.admits_name("evilpypi.org", 443) and not allow.admits_name("pypi.org.evil.com", 443)
    assert allow.admits_name("files.pythonhosted.org", 443)
    assert not allow.admits_name("files.pythonhosted.org", 80)
    assert not allow.admits_name("pythonhosted.org", 443)  # *. is the subdomains, not the name itself
    assert not allow.admits_name("xpythonhosted.org", 443)
    assert allow.admits_name("api.example.org", 9000) and not allow.admits_name("api.example.org", 443)


def test_addresses_are_listed_only_as_written() -> None:
    allow = NetworkAllowlist.parse(["10.0.0.5", "192.168.1.0/24:8080", "[::1]:443"])
    assert allow.admits_address("10.0.0.5", 443) and not allow.admits_address("10.0.0.6", 443)
    assert allow.admits_address("192.168.1.77", 8080) and not allow.admits_address("192.168.1.77", 443)
    assert allow.admits_address("::1", 443)
    assert not allow.admits_name("10.0.0.5", 443)  # an address pattern never admits a name


def test_presets_expand() -> None:
    allow = NetworkAllowlist.parse(["@python", "@github"])
    assert allow.admits_name("files.pythonhosted.org", 443) and allow.admits_name("codeload.github.com", 443)
    assert not allow.admits_name("registry.npmjs.org", 443)
    assert set(PRESETS) == {"python", "node", "debian", "github"}
    for patterns in PRESETS.values():
        for p in patterns:
            NetPattern.parse(p)


@pytest.mark.parametrize("bad", ["", "   ", "*", "*.org.*", "py pi.org", "pypi.org:0", "pypi.org:99999",
                                 "pypi.org:http", "-bad.org", "a..b", "10.0.0.1/8", "[::1", "@nosuch", "exa_mple.org",
                                 "https://pypi.org", "pypi.org/simple", "*.*.org", 42, None])
def test_a_malformed_pattern_names_the_setting(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        NetworkAllowlist.parse([bad])
    assert "network_allow" in err.value.user_message()


@pytest.mark.parametrize(("bad", "said"), [("*", "a wildcard over everything"), ("*.", "a wildcard over everything"),
                                           ("*.com", "every site under .com"), ("*.ORG:443", "every site under .org")])
def test_a_wildcard_over_everything_or_a_top_level_domain_says_so(bad: str, said: str) -> None:
    """Not "not a domain name": the shape is a wildcard's; what it would admit is why it is refused."""
    with pytest.raises(ConfigError) as err:
        NetworkAllowlist.parse([bad])
    assert said in err.value.user_message() and "network mode `on`" in err.value.user_message()


def test_the_setting_is_a_list() -> None:
    with pytest.raises(ConfigError, match="network_allow"):
        NetworkAllowlist.parse("pypi.org")


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.0.1", "169.254.169.254",
                                     "0.0.0.0", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "100.64.0.1",
                                     "224.0.0.1"])
def test_non_public_addresses(address: str) -> None:
    assert not is_public(address)


def test_public_addresses() -> None:
    assert is_public("151.101.0.223") and is_public("2a04:4e42::223")


def test_a_connection_says_what_happened() -> None:
    conn = NetworkConnection("pypi.org", 443, 1.0, verdict="allowed", reason="listed", bytes_up=10, bytes_down=2000)
    assert conn.summary() == "network: pypi.org:443 allowed (listed): 10 B up, 2,000 B down"
    assert conn.to_dict()["bytes_down"] == 2000
