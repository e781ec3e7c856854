"""One-time tokens for the forms that create a key.

The page that shows a new secret answers the POST itself (the secret must never travel through a redirect, the
session or a URL), so a reload or a Back can resubmit that POST. Each form carries a token that a successful
creation consumes; a second submission of the same form finds it gone and creates nothing. Consumption is one
atomic cache delete (Redis DEL, or the local-memory cache's lock), so even two simultaneous submissions create one key.
"""

import secrets

from django.core.cache import cache

LIFETIME_SECONDS = 60 * 60


def _cache_key(user_id: int, nonce: str) -> str:
    return f"console:key-form:{user_id}:{nonce}"


def issue(user_id: int) -> str:
    nonce = secrets.token_urlsafe(24)
    cache.set(_cache_key(user_id, nonce), 1, LIFETIME_SECONDS)
    return nonce


def consume(user_id: int, nonce: str) -> bool:
    """True exactly once per issued token, and only for the user it was issued to."""
    return bool(cache.delete(_cache_key(user_id, nonce)))
