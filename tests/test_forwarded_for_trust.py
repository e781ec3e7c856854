"""X-Forwarded-For counts only when a proxy sent it (issue 18 item 17): gunicorn binds every interface, and a client
that reaches it directly must not choose its own address for the per-address limits by writing the header."""

import pytest
from django.test import Client, RequestFactory

from ops.client_ip import client_ip
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


def request_from(remote: str, forwarded: str):
    return RequestFactory().get("/", REMOTE_ADDR=remote, headers={"X-Forwarded-For": forwarded})


@pytest.mark.parametrize("router", ["10.1.2.3", "172.20.0.5", "192.168.1.9", "100.64.7.1", "127.0.0.1", "fd00::7"])
def test_a_router_on_a_private_network_is_believed_by_default(settings, router):
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(request_from(router, "6.6.6.6, 203.0.113.9")) == "203.0.113.9"


@pytest.mark.parametrize("peer", ["198.51.100.7", "2001:db8::5", "not-an-address"])
def test_a_client_reaching_the_process_directly_is_its_own_address(settings, peer):
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(request_from(peer, "203.0.113.9")) == peer


def test_the_networks_are_a_setting(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    settings.TRUSTED_PROXY_NETWORKS = "198.51.100.0/24"
    assert client_ip(request_from("198.51.100.7", "203.0.113.9")) == "203.0.113.9"
    assert client_ip(request_from("10.1.2.3", "203.0.113.9")) == "10.1.2.3"
    settings.TRUSTED_PROXY_NETWORKS = "*"  # any peer: only where nothing but the router can connect
    assert client_ip(request_from("198.51.100.7", "203.0.113.9")) == "203.0.113.9"


def test_writing_a_new_address_per_request_does_not_escape_the_failed_authentication_limit(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    settings.AUTH_FAILURE_RATE_LIMIT = "3/m"
    direct = Client(REMOTE_ADDR="198.51.100.7")  # a public peer: not the router
    codes = [
        post(direct, CURRENT, "psk_wrong", {"message": "x"}, **{"X-Forwarded-For": f"203.0.113.{n}"}).status_code
        for n in range(5)
    ]
    assert codes == [401, 401, 401, 429, 429]
