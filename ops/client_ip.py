"""The client's address, for limits that count per client.

Behind N trusted proxies, each proxy appends the address it received the request from to X-Forwarded-For, so the
client's address is the N-th entry from the end. Everything before it was written by the client and is never used.
"""

import ipaddress

from django.conf import settings
from django.http import HttpRequest

# An IPv6 client usually holds a whole /64: counting single addresses would let it rotate through them.
IPV6_PREFIX = 64


def client_ip(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR") or ""
    hops = settings.TRUSTED_PROXY_COUNT
    if hops <= 0:
        return remote
    forwarded = [entry.strip() for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    if len(forwarded) < hops or not _is_ip(forwarded[-hops]):
        # Fewer entries than proxies: the request did not come through all of them, so only the peer is known.
        return remote
    return forwarded[-hops]


def client_network(request: HttpRequest) -> str:
    """What per-client limits count: the IPv4 address, or the IPv6 /64 it belongs to."""
    ip = client_ip(request)
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return "unknown"
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/{IPV6_PREFIX}", strict=False).network_address)
    return str(address)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
