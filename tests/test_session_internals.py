"""ops/session_internals.py reaches into requests and niquests (and the urllib3 under each): against a real server on
127.0.0.1, each private part it uses is still there and still does what ops/bounded.py needs. A library upgrade that
changes one fails here, by name, rather than as a bound that silently stops holding."""

import socket
from collections.abc import Iterator

import niquests
import pytest
import requests

from ops import session_internals
from tests.hello_server import hello_server


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with hello_server() as running:
        yield running


LIBRARIES = [pytest.param(requests, id="requests"), pytest.param(niquests, id="niquests")]


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_streamed_response_shows_its_socket_and_keeps_a_body_read_by_other_means(library, url):
    with library.Session() as session:
        response = session.get(url, stream=True, timeout=5)
        connection = session_internals.connection_of(response)
        assert isinstance(getattr(connection, "sock", None), socket.socket)
        assert b"".join(response.iter_content(2)) == b"hello"
        session_internals.keep_body(response, b"kept")
        assert response.content == b"kept"
        response.close()


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_adapter_makes_its_pools_of_the_classes_it_is_given(library, url):
    seen = []
    with library.Session() as session:
        adapter = session.get_adapter(url)
        pools = session_internals.pool_classes(adapter)
        assert pools is not None and set(pools) >= {"http", "https"}
        plain = pools["http"]

        class Noted(plain.ConnectionCls):  # type: ignore[name-defined]
            def getresponse(self, *args, **kwargs):
                seen.append(self)
                return session_internals.sent_then_read(plain.ConnectionCls, self, *args, **kwargs)

        noted = type("NotedPool", (plain,), {"ConnectionCls": Noted})
        session_internals.use_pool_classes(adapter, {**pools, "http": noted})
        assert session.get(url, timeout=5).content == b"hello"
    assert len(seen) == 1 and isinstance(seen[0], plain.ConnectionCls)
    # The library's own table, shared by every pool manager, is left as it was.
    with library.Session() as fresh:
        assert session_internals.pool_classes(fresh.get_adapter(url)) == pools
