import re
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from django.http import HttpRequest, HttpResponse

# A caller-supplied id is echoed only if it is short and plain, so it cannot inject anything into logs or headers.
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Kept in the request's WSGI environ (request.META), which a DRF request also reads through.
_ENVIRON_KEY = "poke.request_id"


class _WithEnviron(Protocol):
    @property
    def META(self) -> dict[str, Any]: ...


def request_id_of(request: _WithEnviron) -> str:
    """The id RequestIdMiddleware gave the request (Django's or DRF's); '' for one that did not pass through it."""
    return str(request.META.get(_ENVIRON_KEY, ""))


class RequestIdMiddleware:
    """Gives every request an id (the caller's X-Request-ID when it is safe) and returns it on every response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.META[_ENVIRON_KEY] = request_id
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
