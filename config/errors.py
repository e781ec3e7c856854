"""Error pages: JSON under /api/ (API clients never get HTML), Django's plain pages elsewhere."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from ingestion.views import api_not_found
from ops.errors import json_error


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


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
    if _is_api(request):
        # Not "nothing was recorded": a crash may come after a message's rows were committed. A retry with the same
        # Idempotency-Key is safe either way.
        message = (
            "Something went wrong on our side. Retry with the same Idempotency-Key (so that a message is never "
            "recorded twice), and contact support with the X-Request-ID if it persists."
        )
        return json_error("internal_error", message)
    return defaults.server_error(request)
