"""Django's Redis cache with an atomic increment in one round trip.

Django's own ``incr`` asks Redis whether the key exists, then increments it: two round trips per rate-limit hit, and
a counter that expires between the two comes back as a new counter with no expiry. One Lua call does both at once.
"""

from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_INCR_IF_EXISTS = """
if redis.call('exists', KEYS[1]) == 1 then
  return redis.call('incrby', KEYS[1], ARGV[1])
end
return false
"""


class _AtomicIncrClient(RedisCacheClient):
    def incr(self, key: Any, delta: int) -> int:
        client = self.get_client(key, write=True)
        value = client.eval(_INCR_IF_EXISTS, 1, key, delta)
        if value is None:
            raise ValueError(f"Key {key!r} not found.")
        return int(value)


class AtomicIncrRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _AtomicIncrClient
