"""Readiness: can this process reach what a request needs? One tiny round trip to each backing store."""

import logging
import secrets

from django.core.cache import cache
from django.db import connection

logger = logging.getLogger(__name__)

OK = "ok"
UNREACHABLE = "unreachable"


def database_status() -> str:
    # Bounded by the connection's connect_timeout (settings) when the server does not answer.
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:
        logger.warning("readiness: database unreachable (%s)", type(error).__name__)
        return UNREACHABLE
    return OK


def cache_status() -> str:
    # A write then a read: a cache that accepts connections but cannot store (read-only replica, out of memory)
    # is not ready either. The value is random so that another process's write cannot make this one pass.
    probe = secrets.token_hex(8)
    try:
        cache.set(f"readyz:{probe}", probe, timeout=5)
        stored = cache.get(f"readyz:{probe}")
    except Exception as error:
        logger.warning("readiness: cache unreachable (%s)", type(error).__name__)
        return UNREACHABLE
    if stored != probe:
        logger.warning("readiness: cache did not keep a value")
        return UNREACHABLE
    return OK


def readiness() -> dict[str, str]:
    return {"database": database_status(), "cache": cache_status()}
