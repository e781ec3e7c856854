"""This server's public address, for what it tells others to call back (a tool's follow-up URL).

PUBLIC_BASE_URL when set (required in production: ``check --deploy`` fails without it). Without it, under DEBUG
(``make run``), the address the last request came to: ``make run PORT=8700`` then tells tools to call back on 8700,
and ``manage.py serve`` sets it from the address it listens on before the first request. Otherwise unknown (None):
the follow-up headers are left out rather than pointing at a server that is not this one."""

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse

_seen: str | None = None


def base_url() -> str | None:
    if settings.PUBLIC_BASE_URL:
        return str(settings.PUBLIC_BASE_URL)
    return _seen if settings.DEBUG else None


def remember(url: str) -> None:
    global _seen
    _seen = url.rstrip("/")


class RememberRequestHostMiddleware:
    """Under DEBUG without PUBLIC_BASE_URL: remember the scheme and host each request came to (a host
    ALLOWED_HOSTS accepted). Elsewhere it removes itself."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if settings.PUBLIC_BASE_URL or not settings.DEBUG:
            raise MiddlewareNotUsed()
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 400:  # a host ALLOWED_HOSTS refused answers 400: not ours to remember
            remember(f"{request.scheme}://{request.get_host()}")
        return response
