"""The client address behind trusted proxies: never the part of X-Forwarded-For a client can write."""

import pytest
from django.test import RequestFactory

from ops.client_ip import client_ip, client_network


def request_from(remote: str, forwarded: str | None = None):
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    return RequestFactory().get("/", REMOTE_ADDR=remote, headers=headers)


def test_without_trusted_proxies_the_peer_is_the_client(settings):
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_ip(request_from("198.51.100.7", "1.2.3.4")) == "198.51.100.7"


@pytest.mark.parametrize(
    ("hops", "forwarded", "expected"),
    [
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "6.6.6.6, 203.0.113.9", "203.0.113.9"),  # the client wrote the first entry; the router appended ours
        (2, "6.6.6.6, 203.0.113.9, 10.0.0.2", "203.0.113.9"),
        (1, "6.6.6.6,203.0.113.9", "203.0.113.9"),
        (1, "2001:db8::1", "2001:db8::1"),
        (2, "203.0.113.9", "10.1.1.1"),  # fewer entries than proxies: only the peer is known
        (1, "", "10.1.1.1"),
        (1, "not-an-address", "10.1.1.1"),
        (1, "6.6.6.6, 203.0.113.9:443", "10.1.1.1"),
    ],
)
def test_behind_proxies_the_entry_they_appended_is_the_client(settings, hops, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = hops
    assert client_ip(request_from("10.1.1.1", forwarded)) == expected


def test_without_a_forwarded_header_the_peer_is_used(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(request_from("10.1.1.1")) == "10.1.1.1"


@pytest.mark.parametrize(
    ("remote", "network"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"),
        ("", "unknown"),
    ],
)
def test_limits_count_ipv4_addresses_and_ipv6_networks(settings, remote, network):
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_network(request_from(remote)) == network
