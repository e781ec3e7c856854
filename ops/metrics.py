"""Prometheus metrics, and the small API the rest of the service calls to count what happened.

Other modules never touch prometheus_client directly: they call `message_accepted`, `rate_limited` or
`delivery_attempt_finished`, so the metric names and labels live in one place.

Under gunicorn every worker is its own process; gunicorn.conf.py sets PROMETHEUS_MULTIPROC_DIR before any worker
imports this module, so the counters are kept in per-process files that a scrape adds up. Without that variable
(tests, `make run`, management commands) they live in this process's memory. Each update is a few microseconds and
never touches the database or the cache.
"""

import os

from prometheus_client import Counter, Histogram

# A worker started by something other than gunicorn.conf.py (a task worker, a one-off command) may still inherit the
# variable; its files then need the directory to exist.
if _multiproc_dir := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(_multiproc_dir, exist_ok=True)

# The request path of an accepted message takes a few milliseconds; the buckets resolve that and the slow tail.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

http_requests = Counter(
    "http_requests",
    "HTTP requests answered, by endpoint (the view), method and status code.",
    ["endpoint", "method", "status"],
)
http_request_duration = Histogram(
    "http_request_duration_seconds",
    "Time from the request entering Django's middleware to the response leaving it.",
    ["endpoint", "status"],
    buckets=LATENCY_BUCKETS,
)
messages_accepted = Counter(
    "ingest_messages_accepted",
    "Messages the API accepted and recorded (replays of an Idempotency-Key not counted), by endpoint.",
    ["endpoint"],
)
requests_rejected = Counter(
    "ingest_requests_rejected",
    "Requests to the message endpoints that were refused, by endpoint and reason (the error code).",
    ["endpoint", "reason"],
)
rate_limited_requests = Counter(
    "ingest_rate_limited",
    "Requests refused by a rate limit, by the limit's scope (key, client_ip, login, password_reset).",
    ["scope"],
)
delivery_attempts = Counter(
    "ingest_delivery_attempts",
    "Hand-off attempts to the assistant, by outcome (delivered, retrying, failed), in the process that ran them.",
    ["outcome"],
)


def message_accepted(endpoint: str) -> None:
    messages_accepted.labels(endpoint).inc()


def request_rejected(endpoint: str, reason: str) -> None:
    requests_rejected.labels(endpoint, reason).inc()


def rate_limited(scope: str) -> None:
    """Call when a rate limit refuses a request; scope names the limit: "key", "client_ip", "login",
    "password_reset" or "signup"."""
    rate_limited_requests.labels(scope).inc()


def delivery_attempt_finished(outcome: str) -> None:
    """Call when a hand-off attempt ends: "delivered", "retrying" (another attempt follows) or "failed" (gave up)."""
    delivery_attempts.labels(outcome).inc()


def request_served(endpoint: str, method: str, status: int, seconds: float) -> None:
    status_text = str(status)
    http_requests.labels(endpoint, method, status_text).inc()
    http_request_duration.labels(endpoint, status_text).observe(seconds)
