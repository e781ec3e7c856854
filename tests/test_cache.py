"""config/cache.py: the Redis cache's client is made once per connection pool, not once per operation."""

from config.cache import AtomicIncrRedisCache


def test_every_operation_shares_one_redis_client():
    # Making a client does not connect, so no Redis server is needed here.
    backend = AtomicIncrRedisCache("redis://127.0.0.1:6379/7", {})._cache

    first = backend.get_client("a", write=True)

    assert backend.get_client("b", write=True) is first
    assert backend.get_client("c") is first  # one server: reads use the same pool
