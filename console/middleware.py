"""The console's login, flash-message and time zone middleware, skipped by the API.

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
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from accounts.models import Profile

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


class PersonTimeZoneMiddleware:
    """Every time a page shows is in the signed-in person's time zone (Settings; UTC until they choose one), written
    by the server the same way everywhere (templates/includes/time.html): one zone whatever the browser's, so the
    Reminders page, whose times are the person's by nature, agrees with every other page."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request) or not request.user.is_authenticated:
            return self.get_response(request)
        name = Profile.objects.filter(user_id=request.user.pk).values_list("time_zone", flat=True).first()
        try:
            zone = ZoneInfo(name or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            zone = ZoneInfo("UTC")
        with timezone.override(zone):
            return self.get_response(request)
