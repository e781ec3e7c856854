"""The console's login and flash-message middleware, skipped by the API.

Requests under /api/v1/ authenticate with a Bearer key on every request: they have no logged-in user to load (DRF
sets ``request.user`` from the key) and show no flash messages. Django runs every middleware for every path, so
each accepted message paid for a lazy user and two message stores it never used. These subclasses pass API
requests straight through and behave exactly as Django's own everywhere else; as subclasses they still satisfy
the admin's checks for Django's classes.

Sessions and CSRF stay Django's own classes: `check --deploy` looks for them by name (and only then checks the
session and CSRF cookie settings). For an API request they cost little: no cookie to read, an unused session store,
and views that are csrf_exempt.
"""

from typing import Any

from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.http import HttpRequest, HttpResponse

# The key-authenticated API (the message endpoints, receipts, the assistant's signed callback). Not /api/schema/ or
# /api/docs/, which are ordinary pages.
API_PREFIX = "/api/v1/"


def is_api_request(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


class _SkippedByTheApi:
    get_response: Any

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class AuthenticationMiddleware(_SkippedByTheApi, DjangoAuthenticationMiddleware):
    pass


class MessageMiddleware(_SkippedByTheApi, DjangoMessageMiddleware):
    pass
