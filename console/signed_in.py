"""The request a console view receives behind ``@login_required``: its ``user`` is a signed-in person, never
Django's AnonymousUser, so a view hands it to the services (which take a ``User``) as it is.
tests/test_console_signed_in.py checks that every view annotated so is behind ``@login_required``."""

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedRequest(HttpRequest):
    user: User
