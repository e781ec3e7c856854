"""The client's address, for limits that count per client.

Behind N trusted proxies, each proxy appends the address it received the request from to X-Forwarded-For, so the
client's address is the N-th entry from the end. Everything before it was written by the client and is never used.

X-Forwarded-For is read only when the connection comes from a proxy: from an address in TRUSTED_PROXY_NETWORKS
(by default the private, shared and loopback ranges a PaaS router connects from). gunicorn binds every interface, so
where the process can also be reached directly, a client there writes the whole header itself; its connection's
own (public) address is then what counts, and it cannot escape a per-address limit by writing a new address into
X-Forwarded-For for every request.
"""

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

# An IPv6 client usually holds a whole /64: counting single addresses would let it rotate through them.
IPV6_PREFIX = 64


# Where a PaaS router's connections come from: private (RFC 1918, IPv6 unique local), shared (RFC 6598) and loopback.
PRIVATE_NETWORKS = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,127.0.0.0/8,::1/128,fc00::/7"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=4)
def _networks(setting: str) -> tuple[Network, ...] | None:
    """The networks of TRUSTED_PROXY_NETWORKS; None for "*" (any peer is a proxy)."""
    if setting.strip() == "*":
        return None
    spec = PRIVATE_NETWORKS if setting.strip().lower() in ("", "private") else setting
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def from_a_trusted_proxy(remote: str) -> bool:
    networks = _networks(settings.TRUSTED_PROXY_NETWORKS)
    if networks is None:
        return True
    try:
        address = ipaddress.ip_address(remote)
    except ValueError:
        return False
    return any(address in network for network in networks)


def client_ip(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR") or ""
    hops = settings.TRUSTED_PROXY_COUNT
    if hops <= 0 or not from_a_trusted_proxy(remote):
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
