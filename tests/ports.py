"""Ports for servers that a test starts and that bind their port later (another process, a server made after the
port is chosen).

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` is free at that moment and is then anyone's again: the
next outgoing connection's automatic local port, or another ``bind(0)``, may take it before the server binds it.
Ports below the kernel's range of ephemeral ports are never handed out automatically, so a port chosen there at
random and found free stays free unless someone asks for it by number."""

import random
import socket
from pathlib import Path

_LOWEST = 10000  # above the well-known and registered ports that services on a machine usually hold


def _ephemeral_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now, outside the ephemeral range when the machine leaves room for it."""
    highest = _ephemeral_ports_start() - 1
    if highest - _LOWEST >= 1000:
        for _ in range(200):
            port = random.randint(_LOWEST, highest)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue  # held by someone, or still in TIME_WAIT
                return port
    with socket.socket() as probe:  # no room below the range: the kernel's choice
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
