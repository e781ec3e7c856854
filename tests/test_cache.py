"""ingestion/hotpath/cache.py: the Redis cache's client is made once per connection pool, not once per operation."""

from ingestion.hotpath.cache import AtomicIncrRedisCache
from tests.test_health import closed_port


def nowhere() -> str:
    """A Redis URL nothing listens on: these tests make clients, which do not connect, and touch no one's Redis."""
    return f"redis://127.0.0.1:{closed_port()}/1"


def test_every_operation_shares_one_redis_client():
    backend = AtomicIncrRedisCache(nowhere(), {})._cache

    first = backend.get_client("a", write=True)

    assert backend.get_client("b", write=True) is first
    assert backend.get_client("c") is first  # one server: reads use the same pool


def test_replies_are_parsed_by_hiredis_on_every_connection():
    """hiredis (requirements.txt) parses Redis's replies in C: the per-key count's client work is about halved
    against redis-py's own Python parser (docs/benchmarks.md). redis-py falls back silently when it is missing."""
    from redis._parsers import _HiredisParser

    backend = AtomicIncrRedisCache(nowhere(), {})._cache

    pool = backend.get_client("a", write=True).connection_pool
    assert pool.connection_kwargs["parser_class"] is _HiredisParser
    assert isinstance(backend._counting_connection()._parser, _HiredisParser)  # not connected: no server needed
