"""Rate limits (DESIGN.md "Limits"), counted in the Django cache (Redis when REDIS_URL is set).

- Per API key, after authentication (INGEST_RATE_LIMIT): one round trip on every accepted request, a Lua call that
  counts the hit and gives a new window's counter its expiry (config/cache.py). django-ratelimit's counting (an add
  that opens the window, then an increment) took two, and the per-key count is on the path of every message.
  Windows are fixed and staggered per key as django-ratelimit staggers them; RATELIMIT_ENABLE switches both off.
- Per client address, on failed authentication (AUTH_FAILURE_RATE_LIMIT), counted by django-ratelimit (failures
  are off the accepted path, so its two round trips cost nothing there): each failure is counted, and the failure
  that goes over the limit leaves a marker until the window ends. A failed attempt reads that marker before it is
  counted, so a limited address gets 429 for every further bad key at the cost of one cache read (plus the one
  indexed lookup a well-formed key costs). A request with a valid key never reads it: an accepted message costs
  the per-key limit's one round trip and no more, and a limited address (a shared NAT, an office) is not locked
  out of keys that work.

Responses carry the IETF RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers), a 429 also
Retry-After.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django_ratelimit.core import get_usage
from rest_framework.throttling import BaseThrottle

from ingestion.client_ip import client_network
from ingestion.exceptions import RateLimited
from keys.models import ApiKey
from ops import metrics

PER_KEY = "per-key"
AUTH_FAILURES = "auth-failures"
_USAGE_ATTRIBUTE = "rate_limit_usage"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_NAMES = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
_EXPIRY_MARGIN = 5  # seconds a counter outlives its window, so clocks a little apart still find it


@dataclass(frozen=True, slots=True)
class Usage:
    policy: str
    limit: int
    window: int  # seconds
    remaining: int
    reset: int  # seconds until the window ends

    def header_fields(self) -> dict[str, str]:
        return {
            "RateLimit-Policy": f'"{self.policy}";q={self.limit};w={self.window}',
            "RateLimit": f'"{self.policy}";r={self.remaining};t={self.reset}',
        }


def parse_rate(rate: str) -> tuple[int, int]:
    """(count, window in seconds) of a rate such as 60/m or 10/30s (validated at start-up by config.env)."""
    count, _, period = rate.partition("/")
    multiplier = int(period[:-1]) if period[:-1] else 1
    return int(count), multiplier * _UNITS[period[-1]]


def describe_rate(rate: str) -> str:
    count, window = parse_rate(rate)
    per = f"per {_UNIT_NAMES[window]}" if window in _UNIT_NAMES else f"every {window} seconds"
    return f"{count} {'request' if count == 1 else 'requests'} {per}"


def _remember(request: Any, usage: Usage) -> None:
    # DRF wraps Django's request; the headers middleware only sees Django's.
    setattr(getattr(request, "_request", request), _USAGE_ATTRIBUTE, usage)


def _count(request: Any, policy: str, rate: str, subject: str) -> tuple[Usage, bool] | None:
    """Count one hit for ``subject`` under ``policy``; None when rate limiting is switched off."""
    counted = get_usage(request, group=policy, key=lambda _group, _request: subject, rate=rate, increment=True)
    if counted is None:
        return None
    limit, window = parse_rate(rate)
    usage = Usage(policy, limit, window, max(0, limit - counted["count"]), max(0, counted["time_left"]))
    return usage, counted["should_limit"]


def _count_in_window(cache_key: str, seconds: int) -> int:
    count_in_window = getattr(cache, "count_in_window", None)
    if count_in_window is not None:  # Redis: one round trip
        return int(count_in_window(cache_key, seconds))
    cache.add(cache_key, 0, seconds)  # local memory: one process, nothing to race with but its own threads
    return int(cache.incr(cache_key))


def count_key_request(key: ApiKey) -> tuple[Usage, bool] | None:
    """Count one request for ``key`` in its current window; None when rate limiting is switched off."""
    if not getattr(settings, "RATELIMIT_ENABLE", True):
        return None
    rate = settings.INGEST_RATE_LIMIT
    limit, window = parse_rate(rate)
    now = int(time.time())
    # Fixed windows, each key's offset by its id so that not every key's window turns over at the same second.
    ends = now + window - (now - key.pk) % window
    count = _count_in_window(f"rl:{PER_KEY}:{key.pk}:{limit}/{window}s:{ends}", window + _EXPIRY_MARGIN)
    return Usage(PER_KEY, limit, window, max(0, limit - count), ends - now), count > limit


class ApiKeyRateThrottle(BaseThrottle):
    """The per-key limit. Raises our own 429 (with the limit in the text) rather than DRF's generic one."""

    def allow_request(self, request: Any, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True
        counted = count_key_request(key)
        if counted is None:
            return True
        usage, over = counted
        _remember(request, usage)
        if over:
            wait = max(1, usage.reset)
            metrics.rate_limited("key")
            raise RateLimited(
                f"Rate limit exceeded: this API key may make {describe_rate(settings.INGEST_RATE_LIMIT)}. "
                f"Retry in {wait} seconds; to send more, combine several messages into one, or use a separate "
                "key for each automation.",
                wait,
            )
        return True


@dataclass(frozen=True)
class AttemptLimit:
    """Attempts per client address (an IPv4 address, an IPv6 /64), counted by django-ratelimit: the attempt that
    goes over the rate (or reaches it) leaves a marker that blocks the address until the window ends. Counts failed
    API-key authentications here, failed log-ins (accounts/login_limits.py) and password reset requests
    (accounts/password_reset.py)."""

    policy: str
    rate_setting: str  # the name of the setting that holds the rate
    # Whether the failure that reaches the rate blocks (log-ins: the Nth wrong password was checked, so no more are)
    # or only the one past it (API keys: that failure is itself answered 429).
    blocks_when_reached: bool = False

    @property
    def rate(self) -> str:
        return str(getattr(settings, self.rate_setting))

    def blocked_for(self, request: Any) -> int:
        """Seconds the address stays blocked, 0 when it is not: one cache read."""
        until = cache.get(self._marker(client_network(request)))
        return 0 if until is None else max(0, int(until - time.time() + 0.999))

    def count(self, request: Any) -> int:
        """Count one attempt; the seconds the address is now blocked for (0: still under the limit, or limits off)."""
        network = client_network(request)
        counted = _count(request, self.policy, self.rate, network)
        if counted is None:
            return 0
        usage, over = counted
        if not (over or (self.blocks_when_reached and usage.remaining == 0)):
            return 0
        wait = max(1, usage.reset)
        cache.set(self._marker(network), time.time() + wait, timeout=wait)
        return wait

    def _marker(self, network: str) -> str:
        return f"{self.policy}-blocked:{network}"


_FAILED_AUTHENTICATIONS = AttemptLimit(AUTH_FAILURES, "AUTH_FAILURE_RATE_LIMIT")


def _auth_failures_limited(request: Any, wait: int) -> RateLimited:
    limit, window = parse_rate(settings.AUTH_FAILURE_RATE_LIMIT)
    _remember(request, Usage(AUTH_FAILURES, limit, window, 0, wait))
    metrics.rate_limited("client_ip")
    return RateLimited(
        "Too many failed authentication attempts from your address "
        f"(the limit is {describe_rate(settings.AUTH_FAILURE_RATE_LIMIT)}). "
        f"Retry in {wait} seconds with a valid API key.",
        wait,
    )


def refuse_if_blocked(request: Any) -> None:
    """One cache read; refuses an address that went over the failed-authentication limit in this window."""
    wait = _FAILED_AUTHENTICATIONS.blocked_for(request)
    if wait > 0:
        raise _auth_failures_limited(request, wait)


def count_failed_authentication(request: Any) -> None:
    """Count a failure for the client's address; the one that goes over the limit blocks it (and gets 429)."""
    wait = _FAILED_AUTHENTICATIONS.count(request)
    if wait > 0:
        raise _auth_failures_limited(request, wait)


class RateLimitHeadersMiddleware:
    """Adds the RateLimit fields of whichever limit counted the request (if any) to its response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        usage: Usage | None = getattr(request, _USAGE_ATTRIBUTE, None)
        if usage is not None:
            for name, value in usage.header_fields().items():
                response[name] = value
        return response
