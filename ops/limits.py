"""Fixed-window counters in the Django cache (Redis when REDIS_URL is set), shared by the API's limits
(ingestion/throttling.py) and the console's log-in and password-reset limits: how a rate is written and described,
a window's usage and its IETF RateLimit header fields, attempts per client address, and the middleware that puts a
request's usage on its response."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_ratelimit.core import get_usage

from ops import metrics
from ops.client_ip import client_network
from ops.outage import CACHE_DOWN

logger = logging.getLogger(__name__)

# Where the limits per address count while the shared cache (Redis) cannot be reached: this process's memory. Each
# process then counts alone, which still bounds an address's attempts (by the limit times the processes), where
# failing would lock everyone out of logging in, and failing open would lift the limit.
_fallback = LocMemCache("ops.limits.fallback", {})

_USAGE_ATTRIBUTE = "rate_limit_usage"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_NAMES = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}


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


def remember_usage(request: Any, usage: Usage) -> None:
    # DRF wraps Django's request; the headers middleware only sees Django's.
    setattr(getattr(request, "_request", request), _USAGE_ATTRIBUTE, usage)


def count_hit(request: Any, policy: str, rate: str, subject: str) -> tuple[Usage, bool] | None:
    """Count one hit for ``subject`` under ``policy``; None when rate limiting is switched off."""
    counted = get_usage(request, group=policy, key=lambda _group, _request: subject, rate=rate, increment=True)
    if counted is None:
        return None
    limit, window = parse_rate(rate)
    usage = Usage(policy, limit, window, max(0, limit - counted["count"]), max(0, counted["time_left"]))
    return usage, counted["should_limit"]


def count_in_window(cache_key: str, seconds: int) -> int:
    return start_count_in_window(cache_key, seconds)()


def start_count_in_window(cache_key: str, seconds: int) -> Callable[[], int]:
    """One more hit on a counter that lives ``seconds``; the returned call gives the count so far. With Redis the
    hit is sent now and its answer read by that call (one round trip the caller can work through); elsewhere it is
    counted now."""
    start = getattr(cache, "start_count_in_window", None)
    if start is not None:
        reader: Callable[[], int] = start(cache_key, seconds)
        return reader
    cache.add(cache_key, 0, seconds)  # local memory: one process, nothing to race with but its own threads
    count = int(cache.incr(cache_key))
    return lambda: count


@dataclass(frozen=True)
class AttemptLimit:
    """Attempts per client address (an IPv4 address, an IPv6 /64), counted by django-ratelimit: the attempt that
    goes over the rate (or reaches it) leaves a marker that blocks the address until the window ends. Counts failed
    API-key authentications here, failed log-ins (console/login_limits.py) and password reset requests
    (console/password_reset.py)."""

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
        marker = self._marker(client_network(request))
        try:
            until = cache.get(marker)
        except CACHE_DOWN as error:
            _cache_down(self.policy, error)
            until = _fallback.get(marker)
        return 0 if until is None else max(0, int(until - time.time() + 0.999))

    def count(self, request: Any) -> int:
        """Count one attempt; the seconds the address is now blocked for (0: still under the limit, or limits off)."""
        network = client_network(request)
        try:
            counted = count_hit(request, self.policy, self.rate, network)
        except CACHE_DOWN as error:
            _cache_down(self.policy, error)
            counted = self._count_here(network)
        if counted is None:
            return 0
        usage, over = counted
        if not (over or (self.blocks_when_reached and usage.remaining == 0)):
            return 0
        wait = max(1, usage.reset)
        until = time.time() + wait
        try:
            cache.set(self._marker(network), until, timeout=wait)
        except CACHE_DOWN as error:
            _cache_down(self.policy, error)
            _fallback.set(self._marker(network), until, timeout=wait)
        return wait

    def _count_here(self, network: str) -> tuple[Usage, bool] | None:
        """The attempt counted in this process's memory, in the same fixed windows, while the cache is down."""
        if not getattr(settings, "RATELIMIT_ENABLE", True):
            return None
        limit, window = parse_rate(self.rate)
        now = time.time()
        counter = f"{self.policy}:{network}:{int(now // window)}"
        _fallback.add(counter, 0, window)
        count = _fallback.incr(counter)
        reset = max(1, int(window - now % window))
        return Usage(self.policy, limit, window, max(0, limit - count), reset), count > limit

    def _marker(self, network: str) -> str:
        return f"{self.policy}-blocked:{network}"


def blocked_page(request: HttpRequest, template: str, wait: int, metric: str) -> HttpResponse:
    """The 429 page of a blocked address: ``template`` says how many ``minutes`` to wait, Retry-After the seconds."""
    metrics.rate_limited(metric)
    response = render(request, template, {"minutes": max(1, (wait + 59) // 60)}, status=429)
    response["Retry-After"] = str(wait)
    return response


def _cache_down(policy: str, error: Exception) -> None:
    logger.warning("cache unreachable (%s): %s attempts are counted in this process only", type(error).__name__, policy)


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
