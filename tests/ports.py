"""Ports for servers that a test starts and that bind their port later (another process, a server made after the
port is chosen).

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` is free at that moment and is then anyone's again: the
next outgoing connection's automatic local port, or another ``bind(0)``, may take it before the server binds it.
Ports below the kernel's range of ephemeral ports are never handed out automatically, so a port chosen there at
random and found free stays free unless someone asks for it by number.

Under pytest-xdist several test processes choose at once: each worker draws only from its own slice of that range,
so two workers never pick the same port, and from its own random source, since pytest-randomly gives every test in
every worker the same seed for the ``random`` module (the same first port everywhere)."""

import os
import random
import socket
from pathlib import Path

_LOWEST = 10000  # above the well-known and registered ports that services on a machine usually hold
_CHOICE = random.SystemRandom()  # the operating system's randomness: no test's seed reaches it


def _ephemeral_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _worker_slice(lowest: int, highest: int) -> tuple[int, int]:
    """This process's share of [lowest, highest]: all of it outside pytest-xdist, one of n equal parts inside."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if not worker.startswith("gw") or count < 2:
        return lowest, highest
    index = int(worker[2:]) % count
    size = (highest - lowest + 1) // count
    return lowest + index * size, lowest + (index + 1) * size - 1


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now, outside the ephemeral range when the machine leaves room for it,
    and in this test worker's own part of it."""
    lowest, highest = _worker_slice(_LOWEST, _ephemeral_ports_start() - 1)
    if highest - lowest >= 500:
        for _ in range(200):
            port = _CHOICE.randint(lowest, highest)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue  # held by someone, or still in TIME_WAIT
                return port
    with socket.socket() as probe:  # no room below the range: the kernel's choice
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
