"""This server's public address, for what it tells others to call back (a tool's follow-up URL).

PUBLIC_BASE_URL when it is set (required in production: ``check --deploy`` fails without it). Without it, under
DEBUG (``make run``), the address the last request came to, so that ``make run PORT=8700`` tells tools to call back
on 8700 (``manage.py serve`` sets it from the address it listens on before the first request); otherwise the
setting's default, http://127.0.0.1:8000."""

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse

_seen: str | None = None


def base_url() -> str:
    if settings.DEBUG and not settings.PUBLIC_BASE_URL_FROM_ENV and _seen is not None:
        return _seen
    return str(settings.PUBLIC_BASE_URL)


def remember(url: str) -> None:
    global _seen
    _seen = url.rstrip("/")


class RememberRequestHostMiddleware:
    """Under DEBUG without PUBLIC_BASE_URL: remember the scheme and host each request came to (a host
    ALLOWED_HOSTS accepted). Elsewhere it removes itself."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if settings.PUBLIC_BASE_URL_FROM_ENV or not settings.DEBUG:
            raise MiddlewareNotUsed()
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 400:  # a host ALLOWED_HOSTS refused answers 400: not ours to remember
            remember(f"{request.scheme}://{request.get_host()}")
        return response
