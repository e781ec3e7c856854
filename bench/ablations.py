"""The hot path's bypasses (ingestion/hotpath), each switched back to what plain Django does, for measuring what it
saves: `python -m bench.instructions --ablations` counts instructions per request with each one on and off.

Only the benchmark's child processes call these, after django.setup() and before their first request; nothing here
is imported by the service. Each entry: the scenario that exercises the bypass, and how to switch it off.
"""

from collections.abc import Callable
from typing import Any


def _remembered_keys() -> None:
    from django.conf import settings

    settings.API_KEY_CACHE_SECONDS = 0  # every request looks its key up


def _joined_lookup() -> None:
    """The key, its owner and their thread (and profile) by the ORM's select_related instead of the hand-built
    statement: the same rows in one query, through the query compiler and the full User row."""
    from ingestion.hotpath import lookup
    from keys.models import ApiKey

    def key_with_owner(digest: str, *, with_profile: bool = False) -> Any:
        related = ["owner__conversation", *(["owner__profile"] if with_profile else [])]
        try:
            return ApiKey.objects.select_related(*related).get(digest=digest)
        except ApiKey.DoesNotExist:
            return None

    lookup.key_with_owner = key_with_owner


def _one_statement_insert() -> None:
    """Each row by its own save() in one transaction (what other databases get) instead of one WITH statement."""
    from ingestion.hotpath import inserts, recording

    recording.insert_together = inserts.insert_by_saves


def _fetch_one() -> None:
    """The hot path's statements through Django's cursor wrapper (ingestion/hotpath/db.py's fallback)."""
    from ingestion.hotpath.postgresql.base import DatabaseWrapper

    DatabaseWrapper.fetch_one = None  # type: ignore[assignment,method-assign]


def _quiet_health_check() -> None:
    """Django's own health check: SELECT 1 before each request's first query on a reused connection."""
    from django.db.backends.postgresql import base

    from ingestion.hotpath.postgresql.base import DatabaseWrapper

    DatabaseWrapper.close_if_health_check_failed = base.DatabaseWrapper.close_if_health_check_failed  # type: ignore[method-assign]


def _one_redis_client() -> None:
    """Django's RedisCacheClient.get_client: a new redis.Redis for every cache operation."""
    from django.core.cache.backends.redis import RedisCacheClient

    from ingestion.hotpath.cache import _AtomicIncrClient

    _AtomicIncrClient.get_client = RedisCacheClient.get_client  # type: ignore[method-assign]


def _own_counting_connection() -> None:
    """The per-key count through the pool's client (checkout, checkin, a poll for unread data) instead of each
    thread's own connection."""
    from ingestion.hotpath.cache import _COUNT_IN_WINDOW, _AtomicIncrClient

    def start_count_in_window(self: Any, key: Any, seconds: int) -> Any:
        count = int(self.get_client(key, write=True).eval(_COUNT_IN_WINDOW, 1, key, seconds))
        return lambda: count

    _AtomicIncrClient.start_count_in_window = start_count_in_window  # type: ignore[method-assign]


def _cache_backend() -> None:
    """Django's own RedisCache for the whole of ingestion/hotpath/cache.py: the count becomes add() then incr()
    (ops/limits.py's path for caches without count_in_window), each incr an EXISTS and an INCRBY."""
    from django.conf import settings

    settings.CACHES["default"]["BACKEND"] = "django.core.cache.backends.redis.RedisCache"


def _drf_bypass() -> None:
    """Every request through DRF's full view (ingestion/accept.py's ordinary request not taken apart)."""
    from ingestion import accept

    accept.remembered_key = lambda request: None


# name: (scenario that exercises it, switch off)
ABLATIONS: dict[str, tuple[str, Callable[[], None]]] = {
    "remembered-keys": ("current", _remembered_keys),
    "joined-lookup": ("legacy", _joined_lookup),
    "one-statement-insert": ("current", _one_statement_insert),
    "fetch-one": ("legacy", _fetch_one),
    "quiet-health-check": ("current", _quiet_health_check),
    "one-redis-client": ("refused", _one_redis_client),
    "own-counting-connection": ("current", _own_counting_connection),
    "cache-backend": ("current", _cache_backend),
    "drf-bypass": ("current", _drf_bypass),
}


def switch_off(names: list[str]) -> None:
    for name in names:
        ABLATIONS[name][1]()
