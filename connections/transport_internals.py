"""The one private part of httpx2 that connections/client.py relies on, here alone: httpx2's transport takes no
network backend, so the pool it builds is replaced by the same pool (httpcore2's, with the TLS settings httpx2
would use) over ours. tests/test_transport_internals.py fails when httpx2 changes it."""

from typing import Any

import httpcore2
import httpx2


def use_network_backend(transport: httpx2.AsyncHTTPTransport, backend: httpcore2.AsyncNetworkBackend) -> None:
    """Every connection of ``transport`` (built with trust_env=False and TLS verification, httpx2's defaults
    otherwise) opened through ``backend``."""
    pool: Any = httpcore2.AsyncConnectionPool(
        ssl_context=httpx2.create_ssl_context(trust_env=False), network_backend=backend
    )
    transport._pool = pool
