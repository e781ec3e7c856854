"""Reaching a person's mail and calendar servers: which addresses we connect to, over what, and for how long.

The same address rule as MCP servers (connections/addresses.py): unless MCP_ALLOW_PRIVATE_ADDRESSES is on, a host
that resolves to a loopback, private or link-local address is refused. The name is resolved once, the addresses
checked, and the socket opened to a checked address (TLS still verifies the certificate against the name), so a
name that resolves elsewhere a moment later (DNS rebinding) reaches nothing inside.

Unencrypted IMAP, SMTP and http:// CalDAV are refused unless MAIL_CALENDAR_ALLOW_PLAINTEXT is on: the person's
app password would cross the network in clear.

Every exchange has a deadline and a byte budget (ops/bounded.py): the bound given to ``connect`` shuts the socket
down when the deadline passes, so a server that trickles bytes cannot hold a worker past it (a socket timeout alone
bounds one read, not the exchange).
"""

import socket
import ssl
import time

from django.conf import settings

from connections.addresses import is_public, private_allowed
from ops.bounded import Bound

MAX_HOST_LENGTH = 253


class ServiceError(Exception):
    """A mail or calendar server could not be used; the text says why in a sentence fit for the person (and the
    model). ``authentication`` when the server refused the username or password."""

    def __init__(self, message: str, *, authentication: bool = False) -> None:
        super().__init__(message)
        self.authentication = authentication


def one_line(text: str, limit: int) -> str:
    """A server's text fit for a sentence: control characters and runs of spaces as one space, at most ``limit``."""
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def plaintext_allowed() -> bool:
    return bool(settings.MAIL_CALENDAR_ALLOW_PLAINTEXT)


def check_host(host: str, label: str) -> str:
    """The host name, stripped, if its form is acceptable; ServiceError otherwise."""
    host = host.strip().rstrip(".").lower()
    if not host or len(host) > MAX_HOST_LENGTH:
        raise ServiceError(f"{label} must be a host name such as imap.example.com.")
    if any(not (ch.isalnum() or ch in "-._:") for ch in host) or host.startswith("-"):
        raise ServiceError(f"{label} must be a bare host name (no scheme, path or spaces), e.g. imap.example.com.")
    return host


def resolve(host: str, port: int, label: str) -> list[tuple[int, str]]:
    """(family, address) pairs to connect to: every address of the host, or a refusal naming why."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise ServiceError(f"The {label} host {host} could not be resolved.") from None
    found: list[tuple[int, str]] = []
    for family, _type, _proto, _name, address in infos:
        ip = str(address[0])
        if not private_allowed() and not is_public(ip):
            raise ServiceError(
                f"{host} resolves to a private, loopback or link-local address; this server only connects to "
                "public addresses (MCP_ALLOW_PRIVATE_ADDRESSES is off)."
            )
        if (family, ip) not in found:
            found.append((int(family), ip))
    if not found:
        raise ServiceError(f"The {label} host {host} could not be resolved.")
    return found


def connect(host: str, port: int, timeout: float, label: str, bound: Bound | None = None) -> socket.socket:
    """A TCP socket to a checked address of the host, or ServiceError (unreachable, refused address, timeout);
    watched by the bound from the start (its deadline shuts it down), when there is one."""
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    for family, ip in resolve(host, port, label)[:4]:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(left)
        try:
            sock.connect((ip, port))
        except OSError as error:
            sock.close()
            last = error
            continue
        return bound.watch(sock) if bound is not None else sock
    if isinstance(last, TimeoutError) or last is None:
        raise ServiceError(f"The {label} server {host}:{port} did not answer in time.")
    raise ServiceError(f"Could not connect to the {label} server {host}:{port} (refused or unreachable).")


def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()
