"""What a process remembers for a while: cachetools' TTLCache, at most ``size`` entries, each for ``seconds``.

Both remembered lookups of the hot path use it: API keys by digest (ingestion/hotpath/recent.py) and linked channel
addresses (channels/senders.py). TTLCache does the expiry and the eviction (the least recently used entry goes first
when it is full); what is ours is only what it does not do:
- the size and lifetime are read from settings at every ``remember`` (a TTLCache fixes them when it is made), so a
  test's settings override applies at once: the cache is made afresh, empty, when they change; 0 for either switches
  remembering off (a TTLCache of size 0 refuses every entry with an error instead);
- one lock around every use: a TTLCache is not safe to share between threads (even a read reorders it), and a
  process's threads share this one."""

import threading
import time
from collections.abc import Callable, Hashable

from cachetools import TTLCache


class Memo[K: Hashable, V]:
    def __init__(self, timer: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._timer = timer  # a test's clock
        self._cache: TTLCache[K, V, float] = TTLCache(maxsize=0, ttl=0, timer=timer)

    def recall(self, key: K) -> V | None:
        """The value remembered for ``key`` while it has not expired, else None."""
        with self._lock:
            try:
                return self._cache[key]  # fewer calls than .get(), which asks twice (in, then [])
            except KeyError:
                return None

    def remember(self, key: K, value: V, seconds: float, size: int) -> None:
        if seconds <= 0 or size <= 0:
            return
        with self._lock:
            if (self._cache.maxsize, self._cache.ttl) != (size, seconds):
                self._cache = TTLCache(maxsize=size, ttl=seconds, timer=self._timer)
            self._cache[key] = value

    def forget(self, key: K) -> None:
        with self._lock:
            self._cache.pop(key, None)

    def forget_all(self) -> None:
        with self._lock:
            self._cache.clear()
