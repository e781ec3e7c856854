"""Django's Redis cache with an atomic increment in one round trip, a window counter in one round trip (sent on
each thread's own connection, and readable later: ``start_count_in_window``), and one Redis client per connection
pool.

Django's own ``incr`` asks Redis whether the key exists, then increments it: two round trips per rate-limit hit, and
a counter that expires between the two comes back as a new counter with no expiry. One Lua call does both at once.

Django also builds a new ``redis.Redis`` for every cache operation, some 540 Python calls each time: a sixth of the
Python calls of an accepted request and nearly half of a refused one's (docs/benchmarks.md). A client is only a
handle on its connection pool and is safe to share between threads, so each pool gets one, made on first use.
"""

import os
import threading
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

_INCR_IF_EXISTS = """
if redis.call('exists', KEYS[1]) == 1 then
  return redis.call('incrby', KEYS[1], ARGV[1])
end
return false
"""

# Count a hit in a fixed window: the first hit creates the counter with the window's expiry, in the same call.
_COUNT_IN_WINDOW = """
local count = redis.call('incr', KEYS[1])
if count == 1 then
  redis.call('expire', KEYS[1], ARGV[1])
end
return count
"""

# A refusal for a webhook trigger's delivery log (ingestion/trigger_log.py), in one round trip: the open line of its
# kind (KEYS[1], a line id stored by Django as a plain integer), one more on that line's count, and whether this
# request is the first in FLUSH seconds (so writes the count to the database). No line: false; a key that holds no
# id (a line being opened, an unknown trigger): {-1, 0, 0}.
_COUNT_ON_LINE = """
local line = redis.call('get', KEYS[1])
if not line then
  return false
end
local id = tonumber(line)
if not id then
  return {-1, 0, 0}
end
local counter = ARGV[1] .. line
local count = redis.call('incr', counter)
if count == 1 then
  redis.call('expire', counter, ARGV[3])
end
local flush = redis.call('set', ARGV[2] .. line, '1', 'NX', 'EX', ARGV[4])
return {id, count, flush and 1 or 0}
"""


class _AtomicIncrClient(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._own = threading.local()  # each thread's counting connection, and the process that made it

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        django_client: Any = self  # Django's private helpers, which its type stubs leave out
        index = django_client._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            pool = django_client._get_connection_pool(write)
            client = self._clients[index] = django_client._client(connection_pool=pool)
        return client

    def incr(self, key: Any, delta: int) -> int:
        client = self.get_client(key, write=True)
        value = client.eval(_INCR_IF_EXISTS, 1, key, delta)
        if value is None:
            raise ValueError(f"Key {key!r} not found.")
        return int(value)

    def count_in_window(self, key: Any, seconds: int) -> int:
        return self.start_count_in_window(key, seconds)()

    def start_count_in_window(self, key: Any, seconds: int) -> Callable[[], int]:
        """Send the count now; the returned call reads its answer (once; later calls give the same count). Meanwhile
        the thread may do other work, but must read the answer before its next Redis command on this connection
        (``_counting_connection`` reads one left unread first, so a forgotten answer cannot be taken for another)."""
        connection = self._counting_connection()
        try:
            connection.send_command("EVAL", _COUNT_IN_WINDOW, 1, key, seconds)
        except (RedisConnectionError, RedisTimeoutError):
            # A socket gone stale (Redis restarted, a timeout left a reply unread): a fresh one, once, as the pool's
            # client retries.
            connection.disconnect()
            connection.send_command("EVAL", _COUNT_IN_WINDOW, 1, key, seconds)
        pending = _PendingCount(self._own, connection, key, seconds)
        self._own.unread = pending
        return pending

    def count_on_line(self, keys: list[Any], args: list[Any]) -> Any:
        connection = self._counting_connection()
        try:
            connection.send_command("EVAL", _COUNT_ON_LINE, 1, *keys, *args)
            return connection.read_response()
        except (RedisConnectionError, RedisTimeoutError):
            connection.disconnect()  # as in start_count_in_window; counting a refusal twice in the log is harmless
            connection.send_command("EVAL", _COUNT_ON_LINE, 1, *keys, *args)
            return connection.read_response()

    def _counting_connection(self) -> AbstractConnection:
        """This thread's own connection for the per-key count, which every accepted request makes.

        Through the pool, redis-py checks a connection out and in again around each command, asks the socket
        whether it has unread data (a system call) and records pool metrics: more work than the command itself.
        A gunicorn thread serves one request at a time, so a connection of its own needs none of that.
        """
        own = self._own
        if getattr(own, "pid", None) != os.getpid():  # first use in this thread, or a forked child's copy
            django_client: Any = self
            pool = django_client._get_connection_pool(True)
            own.connection, own.pid, own.unread = pool.connection_class(**pool.connection_kwargs), os.getpid(), None
        if own.unread is not None:
            own.unread()  # an earlier count's answer, still on the socket
        connection: AbstractConnection = own.connection
        return connection


class _PendingCount:
    """A count sent on a thread's own connection whose answer is not read yet (``start_count_in_window``)."""

    def __init__(self, owner: threading.local, connection: AbstractConnection, key: Any, seconds: int) -> None:
        self.owner, self.connection, self.key, self.seconds = owner, connection, key, seconds
        self.count: int | None = None

    def __call__(self) -> int:
        if self.count is None:
            self.owner.unread = None
            try:
                self.count = int(self.connection.read_response())
            except (RedisConnectionError, RedisTimeoutError):
                # As when sending: a fresh socket, once. The count may have reached Redis before the socket failed;
                # counting a hit twice errs towards the limit, never past it.
                self.connection.disconnect()
                self.connection.send_command("EVAL", _COUNT_IN_WINDOW, 1, self.key, self.seconds)
                self.count = int(self.connection.read_response())
        return self.count


class AtomicIncrRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _AtomicIncrClient

    def count_in_window(self, key: str, seconds: int) -> int:
        """One more hit on ``key``, a counter that lives ``seconds`` from its first hit; returns the count so far."""
        return self.start_count_in_window(key, seconds)()

    def start_count_in_window(self, key: str, seconds: int) -> Callable[[], int]:
        """``count_in_window`` in two halves: the hit is sent now, and the returned call (on the same thread, before
        its next count) reads the count, so the thread can work while the answer travels."""
        cache: Any = self  # Django's private helpers, which its type stubs leave out
        reader: Callable[[], int] = cache._cache.start_count_in_window(self.make_and_validate_key(key), seconds)
        return reader

    def count_on_line(
        self, open_key: str, count_prefix: str, flush_prefix: str, count_seconds: int, flush_seconds: int
    ) -> tuple[int, int, bool] | None:
        """For the delivery log's coalescing (ingestion/trigger_log.py, ``_COUNT_ON_LINE`` above): None when no
        line of this kind is open; else (the line's id, or -1 when the key holds none; its count; whether to flush).
        The prefixes are cache keys that the line's id completes."""
        cache: Any = self
        found = cache._cache.count_on_line(
            [self.make_and_validate_key(open_key)],
            [self.make_and_validate_key(count_prefix), self.make_and_validate_key(flush_prefix), count_seconds,
             flush_seconds],
        )  # fmt: skip
        if not found:
            return None
        line, count, flush = (int(value) for value in found)
        return line, count, bool(flush)
