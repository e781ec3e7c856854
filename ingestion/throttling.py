"""Rate limits (docs/design.md#limits), counted in the Django cache (Redis when REDIS_URL is set).

- Per API key, after authentication (INGEST_RATE_LIMIT): one round trip on every accepted request, a Lua call that
  counts the hit and gives a new window's counter its expiry (ingestion/hotpath/cache.py). django-ratelimit's counting
  (an add
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
Retry-After. The counting that is not about keys (Usage, AttemptLimit, the headers) is ops/limits.py, shared with
the console's log-in.
"""

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from ingestion.exceptions import RateLimited
from keys.models import ApiKey
from ops import metrics
from ops.limits import AttemptLimit, Usage, describe_rate, parse_rate, remember_usage, start_count_in_window
from triggers.models import WebhookTrigger

PER_KEY = "per-key"
AUTH_FAILURES = "auth-failures"
_EXPIRY_MARGIN = 5  # seconds a counter outlives its window, so clocks a little apart still find it


def _allowed() -> None:
    """The second half of a limit that does not count this request."""


def count_key_request(
    key: ApiKey | WebhookTrigger, policy: str = PER_KEY, rate: str | None = None
) -> tuple[Usage, bool] | None:
    """Count one request for ``key`` in its current window of ``policy`` (the sending limit unless told otherwise):
    its usage and whether it is over the limit; None when rate limiting is switched off."""
    counting = start_key_count(key, policy, rate)
    return None if counting is None else counting()


def start_key_count(
    key: ApiKey | WebhookTrigger, policy: str = PER_KEY, rate: str | None = None
) -> Callable[[], tuple[Usage, bool]] | None:
    """``count_key_request`` in two halves: the hit is sent now; the returned call reads what ``count_key_request``
    returns (ops.limits.start_count_in_window). None when rate limiting is switched off."""
    if not getattr(settings, "RATELIMIT_ENABLE", True):
        return None
    rate = rate or settings.INGEST_RATE_LIMIT
    limit, window = parse_rate(rate)
    now = int(time.time())
    # Fixed windows, each key's offset by its id so that not every key's window turns over at the same second.
    ends = now + window - (now - key.pk) % window
    counted = start_count_in_window(f"rl:{policy}:{key.pk}:{limit}/{window}s:{ends}", window + _EXPIRY_MARGIN)

    def usage() -> tuple[Usage, bool]:
        count = counted()
        return Usage(policy, limit, window, max(0, limit - count), ends - now), count > limit

    return usage


class WindowThrottle(BaseThrottle):
    """One request counted for its subject (``request.auth``: a key or a webhook trigger) in the subject's fixed
    window, and our own 429 past the rate (with the limit in the text) rather than DRF's generic one. Each limit says
    which subjects it counts, under which policy, at which rate setting, and words its refusal."""

    rate_setting = "INGEST_RATE_LIMIT"
    metric = "key"  # the label of ingest_rate_limited_total

    def policy(self, subject: Any) -> str | None:
        """The policy ``subject`` is counted under, or None when this limit does not count it."""
        raise NotImplementedError

    def refusal(self, rate: str, wait: int) -> str:
        raise NotImplementedError

    def allow_request(self, request: Any, view: Any) -> bool:
        self.start(request)()
        return True

    def start(self, request: Any) -> Callable[[], None]:
        """``allow_request`` in two halves: the request is counted now, and the returned call reads the count, puts
        the usage on the request and raises the refusal past the rate. In between the caller may do work that does
        not depend on the answer (ingestion/views.py's ordinary request parses its body) while the count travels."""
        subject = request.auth
        policy = self.policy(subject)
        if policy is None:
            return _allowed
        rate = getattr(settings, self.rate_setting)
        counting = start_key_count(subject, policy, rate)
        if counting is None:
            return _allowed

        def finish() -> None:
            usage, over = counting()
            remember_usage(request, usage)
            if over:
                wait = max(1, usage.reset)
                metrics.rate_limited(self.metric)
                raise RateLimited(self.refusal(describe_rate(rate), wait), wait)

        return finish


class ApiKeyRateThrottle(WindowThrottle):
    """The per-key sending limit (INGEST_RATE_LIMIT)."""

    def policy(self, subject: Any) -> str | None:
        return PER_KEY if isinstance(subject, ApiKey) else None

    def refusal(self, rate: str, wait: int) -> str:
        return (
            f"Rate limit exceeded: this API key may make {rate}. Retry in {wait} seconds; to send more, combine "
            "several messages into one, or use a separate key for each automation."
        )


PER_KEY_READS = "per-key-reads"
PER_TRIGGER_READS = "per-trigger-reads"


class ReceiptReadThrottle(WindowThrottle):
    """Receipt reads have a limit of their own per key (RECEIPT_RATE_LIMIT): a script that polls for what became of
    its messages must not use up what it may send. A webhook trigger's token reads the receipts of its own firings."""

    rate_setting = "RECEIPT_RATE_LIMIT"

    def policy(self, subject: Any) -> str | None:
        if isinstance(subject, ApiKey):
            return PER_KEY_READS
        return PER_TRIGGER_READS if isinstance(subject, WebhookTrigger) else None

    def refusal(self, rate: str, wait: int) -> str:
        return (
            f"Rate limit exceeded: receipts may be read {rate} with one key or webhook token. Retry in {wait} seconds."
        )


PER_TRIGGER = "per-trigger"


class WebhookTriggerRateThrottle(WindowThrottle):
    """A webhook trigger's own limit, INGEST_RATE_LIMIT per trigger, counted like a key's."""

    metric = "trigger"

    def policy(self, subject: Any) -> str | None:
        return PER_TRIGGER if isinstance(subject, WebhookTrigger) else None

    def refusal(self, rate: str, wait: int) -> str:
        return (
            f"Rate limit exceeded: this webhook trigger may fire {rate}. "
            f"Retry in {wait} seconds, or send several events in one request."
        )


_FAILED_AUTHENTICATIONS = AttemptLimit(AUTH_FAILURES, "AUTH_FAILURE_RATE_LIMIT")


def _auth_failures_limited(request: Any, wait: int) -> RateLimited:
    limit, window = parse_rate(settings.AUTH_FAILURE_RATE_LIMIT)
    remember_usage(request, Usage(AUTH_FAILURES, limit, window, 0, wait))
    metrics.rate_limited("client_ip")
    return RateLimited(
        "Too many failed authentication attempts from your address "
        f"(the limit is {describe_rate(settings.AUTH_FAILURE_RATE_LIMIT)}). "
        f"Retry in {wait} seconds with a valid API key.",
        wait,
    )


def count_failed_authentication(request: Any) -> None:
    """After a failed authentication: an address already over the limit in this window is refused (429) after one
    cache read; otherwise the failure is counted, and the one that goes over the limit blocks it (and gets 429)."""
    wait = _FAILED_AUTHENTICATIONS.blocked_for(request) or _FAILED_AUTHENTICATIONS.count(request)
    if wait > 0:
        raise _auth_failures_limited(request, wait)
