"""Two middlewares for operators: the health, readiness and metrics endpoints, and per-request telemetry (one
JSON log line per API request, Prometheus counters for every request)."""

import hmac
import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from ops import exposition, metrics
from ops.client_ip import client_ip
from ops.errors import error_body
from ops.health import OK, readiness
from ops.http import REPLAYED_HEADER, declared_length
from ops.redaction import loggable_path
from ops.request_id import request_id_of

access_log = logging.getLogger("access")

_PROBE_METHODS = ("GET", "HEAD")
# Label values must come from a small set: a client inventing methods must not invent time series.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json", headers=headers)
    response["Cache-Control"] = "no-store"
    return response


class OperatorEndpointsMiddleware:
    """Answers /healthz, /readyz and the metrics path first, before host validation, the HTTPS redirect, sessions
    and URL resolution: a platform probe may address the process by its IP over plain HTTP, and a probe should cost
    next to nothing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.metrics_path = settings.METRICS_PATH
        self.metrics_token = settings.METRICS_TOKEN.encode()
        self.metrics_networks = [ipaddress.ip_network(item, strict=False) for item in settings.METRICS_ALLOWED_IPS]
        # Off unless an operator said who may read them: the path is then an ordinary 404.
        self.metrics_enabled = bool(self.metrics_token or self.metrics_networks)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if request.method in _PROBE_METHODS:
            if path == "/healthz":
                return _json(200, {"status": "ok"})
            if path == "/readyz":
                return self.ready()
            if path == self.metrics_path and self.metrics_enabled:
                return self.metrics(request)
        return self.get_response(request)

    def ready(self) -> HttpResponse:
        checks = readiness()
        if all(state == OK for state in checks.values()):
            return _json(200, {"status": "ready", "checks": checks})
        return _json(503, {"status": "unavailable", "checks": checks}, headers={"Retry-After": "5"})

    def metrics(self, request: HttpRequest) -> HttpResponse:
        if self.metrics_networks and not self.from_allowed_network(request):
            return _json(403, error_body("forbidden", "Metrics are not served to this address."))
        if self.metrics_token and not self.has_token(request):
            return _json(
                401,
                error_body("unauthorized", "Send 'Authorization: Bearer <METRICS_TOKEN>'."),
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        return HttpResponse(exposition.render(), content_type=exposition.CONTENT_TYPE)

    def from_allowed_network(self, request: HttpRequest) -> bool:
        try:
            address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            return False
        return any(address in network for network in self.metrics_networks)

    def has_token(self, request: HttpRequest) -> bool:
        scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        # Constant time, so the comparison does not reveal how much of a guess was right.
        return scheme.lower() == "bearer" and hmac.compare_digest(presented.encode(), self.metrics_token)


_REPEATED_SLASHES = re.compile(r"/{2,}")


class ApiPathsMiddleware:
    """Two things about API paths, before Django's own middleware sees them:

    - An API path with repeated slashes is the path with single ones: /api/v1//inbound/api-message is
      /api/v1/inbound/api-message. The npm SDK joins its base URL and the path without trimming a trailing slash, so
      POKE_API=https://host/api/v1/ sends the former. Rewritten in place, not redirected (a client need not repeat a
      POST after a redirect), and only under /api/: the console's paths stay exact.
    - Plain HTTP to the API is redirected to HTTPS (SecurityMiddleware) with a JSON body that says so, like every
      other answer of the API, rather than an empty one labelled text/html."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if "//" in path:
            collapsed = _REPEATED_SLASHES.sub("/", path)
            if collapsed.startswith("/api/"):
                request.path = request.path[: len(request.path) - len(path)] + collapsed
                request.path_info = collapsed
        response = self.get_response(request)
        if response.status_code == 301 and request.path_info.startswith("/api/") and not request.is_secure():
            location = response.get("Location", "")
            if location.startswith("https://"):
                response = _json(301, error_body("https_required", f"Use HTTPS: {location}"), {"Location": location})
        return response


class RequestTelemetryMiddleware:
    """Counts every request by endpoint and status, and writes one JSON line per request: the service's access log
    (gunicorn's own access line is off by default, so a request is logged once). It reads only what the request
    already holds (the key authentication loaded), so it adds no query and no cache round trip."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.static_prefix = settings.STATIC_URL or "/static/"

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        seconds = time.perf_counter() - started

        endpoint, is_message_endpoint = self.endpoint_of(request)
        method = request.method if request.method in _KNOWN_METHODS else "OTHER"
        status = response.status_code
        metrics.request_served(endpoint, method, status, seconds)
        code = _error_code(response) if status >= 400 else None
        if is_message_endpoint:
            if status >= 400:
                metrics.request_rejected(endpoint, code or f"http_{status}")
            elif status < 300 and REPLAYED_HEADER not in response:
                # Accepted means recorded: the view answers 2xx only after the message's transaction committed, and
                # a replayed Idempotency-Key response recorded nothing new.
                metrics.message_accepted(endpoint)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info("request", extra={"fields": _log_fields(request, response, endpoint, code, seconds)})
        return response

    def endpoint_of(self, request: HttpRequest) -> tuple[str, bool]:
        """A bounded label: the message endpoint's name (as deliveries record it), else the view's name."""
        match = request.resolver_match
        if match is None:
            return ("static" if request.path_info.startswith(self.static_prefix) else "unmatched"), False
        endpoint = getattr(getattr(match.func, "view_class", None), "endpoint", None)
        if endpoint is not None:
            return str(endpoint), True
        return match.view_name or "unnamed", False


def _error_code(response: HttpResponse) -> str | None:
    data = getattr(response, "data", None)  # DRF responses keep the body they rendered
    code = data.get("code") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def _log_fields(
    request: HttpRequest, response: HttpResponse, endpoint: str, code: str | None, seconds: float
) -> dict[str, Any]:
    # The key authentication accepted, if any (DRF copies it onto the Django request): its id and display hint,
    # never the key itself nor its digest.
    key = getattr(request, "auth", None)
    return {
        "request_id": request_id_of(request) or None,
        "method": request.method,
        "path": loggable_path(request.path_info),  # never a password reset link's token
        "endpoint": endpoint,
        "status": response.status_code,
        "code": code,
        "latency_ms": round(seconds * 1000, 2),
        "key_id": getattr(key, "pk", None),
        "key_hint": getattr(key, "hint", None),
        "user_id": getattr(key, "owner_id", None),
        "client_ip": client_ip(request),
        "user_agent": request.META.get("HTTP_USER_AGENT", "")[:200] or None,
        "bytes_in": declared_length(request) or 0,
        "bytes_out": None if response.streaming else len(response.content),
    }
