"""What "the database or the cache cannot be reached" looks like as an exception, for every layer that answers 503
(the API's error handler, the console's error pages) or carries on without the cache (the limits per address)."""

import redis.exceptions
from django.db import InterfaceError, OperationalError

DATABASE_DOWN: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
CACHE_DOWN: tuple[type[Exception], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
BACKING_STORE_DOWN = DATABASE_DOWN + CACHE_DOWN

RETRY_AFTER_SECONDS = 5  # what a 503 asks callers to wait, as /readyz's does


def is_outage(error: BaseException | None) -> bool:
    return isinstance(error, BACKING_STORE_DOWN)
