"""Which MCP server URLs we connect to: http(s) only, and, unless MCP_ALLOW_PRIVATE_ADDRESSES is on, never an
address inside our own network (loopback, private, link-local such as a cloud metadata service, ...).

The check runs twice: on the URL when a connection is added (every address its host resolves to), and on the
address each TCP connection is actually opened to (``GuardedBackend``), so a name that resolves to a public
address when checked and to a private one a moment later (DNS rebinding) still reaches nothing inside.
"""

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore2
from django.conf import settings

MAX_URL_LENGTH = 2000


class RefusedUrl(ValueError):
    """The URL is not one we connect to; the text says why."""


def check_url(url: str) -> str:
    """The URL, stripped, if its form is acceptable (scheme, host, no credentials); raise RefusedUrl otherwise."""
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise RefusedUrl(f"serverUrl is longer than {MAX_URL_LENGTH} characters.")
    if any(not ch.isprintable() or ch.isspace() for ch in url):
        raise RefusedUrl("serverUrl contains spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise RefusedUrl("serverUrl is not a valid URL.") from None
    if parts.scheme not in ("http", "https"):
        raise RefusedUrl("serverUrl must be an http:// or https:// URL, for example https://mcp.example.com/mcp.")
    if not parts.hostname:
        raise RefusedUrl("serverUrl has no host name.")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("serverUrl must not carry a user name or password; send the server's key as apiKey.")
    if port == 0:
        raise RefusedUrl("serverUrl has port 0.")
    return url


# IPv6 prefixes whose last 32 bits are an IPv4 address that a translator or the host's own stack delivers to:
# IPv4-compatible (::/96, deprecated but still routed by some stacks), IPv4-translated (SIIT, ::ffff:0:0:0/96) and
# NAT64's well-known prefix (64:ff9b::/96, RFC 6052). Mapped addresses (::ffff:0:0/96), 6to4 and Teredo have
# accessors of their own in ipaddress.
_LAST_32_BITS_ARE_IPV4 = tuple(ipaddress.IPv6Network(prefix) for prefix in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96"))


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition form leads to (none for a plain IPv6 address)."""
    found = [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]
    if ip.teredo is not None:
        found.extend(ip.teredo)  # the relay server and the client behind it
    if any(ip in prefix for prefix in _LAST_32_BITS_ARE_IPV4):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def is_public(address: str) -> bool:
    """Whether the address is one on the public internet, an IPv6 address that carries an IPv4 one only when that
    IPv4 address is public too: behind NAT64 or a 6to4 relay, [64:ff9b::127.0.0.1] is 127.0.0.1. (A NAT64 prefix
    an operator picked for their own network cannot be told from a public address; run with no such route.)"""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if not all(_plainly_public(v4) for v4 in embedded):
            return False
        if ip.ipv4_mapped is not None or any(ip in prefix for prefix in _LAST_32_BITS_ARE_IPV4):
            return True  # only a way of writing the IPv4 address, judged above
    return _plainly_public(ip)


def _plainly_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def private_allowed() -> bool:
    return bool(settings.MCP_ALLOW_PRIVATE_ADDRESSES)


def check_resolved(url: str) -> None:
    """Refuse a URL whose host resolves to an address inside our network (any of its addresses)."""
    if private_allowed():
        return
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise RefusedUrl(f"The host name {host!r} could not be resolved.") from None
    for info in infos:
        if not is_public(str(info[4][0])):
            raise RefusedUrl(
                f"{host} resolves to a private, loopback or link-local address; this server only connects to "
                "public addresses (MCP_ALLOW_PRIVATE_ADDRESSES is off)."
            )


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Opens each TCP connection to a resolved address that passed ``is_public`` (unless private ones are allowed)."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()  # the backend httpcore2 uses under asyncio

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        target = host
        if not private_allowed():
            try:
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError:
                raise httpcore2.ConnectError(f"could not resolve {host}") from None
            allowed = [str(info[4][0]) for info in infos if is_public(str(info[4][0]))]
            if not allowed:
                raise httpcore2.ConnectError(f"{host} resolves to no public address")
            target = allowed[0]  # TLS still verifies the certificate against the host name, not this address
        return await self._inner.connect_tcp(
            target, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("Unix sockets are not used")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
