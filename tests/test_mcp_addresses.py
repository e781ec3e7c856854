"""Which addresses count as public for MCP servers (connections/addresses.py): an IPv6 address that carries an
IPv4 one (mapped, translated, compatible, NAT64, 6to4, Teredo) is judged by the IPv4 address it leads to, since a
NAT64 gateway or a 6to4 relay delivers it there."""

import pytest

from connections.addresses import is_public


@pytest.mark.parametrize(
    "address",
    [
        "::127.0.0.1",  # IPv4-compatible (deprecated, still routed by some stacks)
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT)
        "::ffff:0:10.0.0.5",
        "64:ff9b::127.0.0.1",  # NAT64, well-known prefix
        "64:ff9b::10.1.2.3",
        "64:ff9b::169.254.169.254",  # the cloud metadata service through NAT64
        "64:ff9b:1::a00:5",  # NAT64, local-use prefix
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:5::1",  # 6to4 of 10.0.0.5
        "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1 (obfuscated)
        "::1",
        "fe80::1%eth0",
        "fd00::1",
    ],
)
def test_ipv6_forms_of_inside_addresses_are_not_public(address):
    assert not is_public(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:93.184.215.14"])
def test_public_addresses_stay_public(address):
    assert is_public(address)
