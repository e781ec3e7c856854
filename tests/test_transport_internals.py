"""connections/transport_internals.py replaces httpx2's connection pool to give it our network backend: against a
real server on 127.0.0.1, every connection of the transport goes through the backend given. An httpx2 that keeps its
pool elsewhere fails here, rather than as MCP connections that stop checking the addresses they open."""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpcore2
import httpx2
import pytest

from connections import transport_internals
from tests.hello_server import hello_server


@pytest.fixture
def url() -> Iterator[str]:
    with hello_server() as running:
        yield running


class _Noting(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.opened: list[tuple[str, int]] = []
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore2.AsyncNetworkStream:
        self.opened.append((host, port))
        return await self._inner.connect_tcp(host, port, *args, **kwargs)


def test_every_connection_of_the_transport_goes_through_the_backend_given(url):
    backend = _Noting()
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    transport_internals.use_network_backend(transport, backend)

    async def fetch() -> bytes:
        async with httpx2.AsyncClient(transport=transport) as client:
            return (await client.get(url)).content

    # In a thread of its own: an event loop another test left running in this one would make anyio.run refuse.
    with ThreadPoolExecutor(1) as thread:
        assert thread.submit(anyio.run, fetch).result(timeout=30) == b"hello"
    assert backend.opened == [("127.0.0.1", int(url.rsplit(":", 1)[1].strip("/")))]
