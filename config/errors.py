"""Error pages: JSON under /api/ (API clients never get HTML) and for the console's JSON requests, Django's plain
pages elsewhere. An unreachable database or cache is a 503 with Retry-After, not a 500, wherever it is noticed: in a
view, in a middleware (sessions, the log-in limit) or while loading the logged-in user."""

import sys
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults

from ingestion.views import api_not_found
from ops.errors import json_error
from ops.outage import RETRY_AFTER_SECONDS, is_outage
from ops.slow_clients import RequestReadTimeout


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _wants_json(request: HttpRequest) -> bool:
    """The API, and the console's own JSON requests (the thread's updates and its send box ask for JSON)."""
    if _is_api(request):
        return True
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's refusal of a suspicious request before any view, most often a Host not in ALLOWED_HOSTS."""
    if _is_api(request):
        message = (
            "The request was refused as malformed: send it to this server's own host name (the Host header) "
            "with well-formed headers."
        )
        return json_error("bad_request", message)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return api_not_found(request)  # the same answer as an unknown path under /api/
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    error = sys.exc_info()[1]  # called while the exception is being handled
    if is_outage(error):
        return service_unavailable(request)
    if isinstance(error, RequestReadTimeout):
        return request_timeout(request)
    if _is_api(request):
        # Not "nothing was recorded": a crash may come after a message's rows were committed. A retry with the same
        # Idempotency-Key is safe either way.
        message = (
            "Something went wrong on our side. Retry with the same Idempotency-Key (so that a message is never "
            "recorded twice), and contact support with the X-Request-ID if it persists."
        )
        return json_error("internal_error", message)
    if isinstance(error, ValueError) and "Missing staticfiles manifest entry" in str(error):
        return HttpResponse(NOT_COLLECTED, status=500, content_type="text/plain; charset=utf-8")
    return defaults.server_error(request)


# With DEBUG off the pages name their stylesheets by the hashed names `collectstatic` writes (STORAGES): until it
# has run, every console page fails. Say what to run rather than a bare 500. It names no secret or path.
NOT_COLLECTED = (
    "Server error: this server's static files have not been collected. Its operator runs\n\n"
    "    python manage.py collectstatic --no-input\n\n"
    "(a PaaS build runs it; see docs/howto/deploy.md), then reloads this page.\n"
)


def service_unavailable(request: HttpRequest) -> HttpResponse:
    """503: the database or cache cannot be reached. The page is rendered without the request (no logged-in user,
    no session, no flash messages: each could need the store that is down)."""
    retry_after = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if _wants_json(request):
        message = "The service is briefly unavailable (its database or cache cannot be reached). Retry shortly."
        return json_error("service_unavailable", message, headers=retry_after)
    try:
        page: str = render_to_string("503.html")
    except ValueError:  # its stylesheet's hashed name unknown: static files not collected on this server
        page = "<!doctype html><title>Briefly unavailable</title><h1>Briefly unavailable</h1><p>Try again shortly.</p>"
    return HttpResponse(page, status=503, headers=retry_after)


def request_timeout(request: HttpRequest) -> HttpResponse:
    """408: the body did not arrive within REQUEST_READ_TIMEOUT (ops/slow_clients.py); the connection then closes."""
    message = "The request body did not arrive in time. Send the headers and the body without pausing."
    if _wants_json(request):
        return json_error("request_timeout", message)
    return HttpResponse(message, status=408, content_type="text/plain; charset=utf-8")
