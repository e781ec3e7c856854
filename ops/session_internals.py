"""The private parts of requests and niquests (and of the urllib3 under each) that ops/bounded.py relies on, here
alone: neither library offers a public way to read a streamed body through a bound and then hand it back as
``response.content``, to find the socket a response reads from, or to choose a pool's connection class.
tests/test_session_internals.py fails when either library changes one of them."""

from typing import Any


def connection_of(response: Any) -> Any:
    """The urllib3 connection a streamed response reads its body from (None once released)."""
    return getattr(getattr(response, "raw", None), "_connection", None)


def keep_body(response: Any, content: bytes) -> None:
    """The body read by other means, kept as the library keeps what it read: ``response.content`` is ``content``."""
    response._content = content
    response._content_consumed = True


def pool_classes(adapter: Any) -> dict[str, Any] | None:
    """The connection pool class of each scheme that a transport adapter's pool manager makes pools of."""
    pools = getattr(getattr(adapter, "poolmanager", None), "pool_classes_by_scheme", None)
    return pools if isinstance(pools, dict) else None


def use_pool_classes(adapter: Any, pools: dict[str, Any]) -> None:
    """Pools of these classes from now on (a new dict: the library's own is shared by every pool manager)."""
    adapter.poolmanager.pool_classes_by_scheme = pools


def sent_then_read(connection_class: Any, connection: Any, *args: Any, **kwargs: Any) -> Any:
    """The library's ``getresponse`` of a connection: called once the request is sent, it reads the status line and
    the headers."""
    return connection_class.getresponse(connection, *args, **kwargs)
