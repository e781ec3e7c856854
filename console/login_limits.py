"""Failed log-ins per client address, for the console's log-in page and the admin's alike.

Every failed password check that Django's ``authenticate()`` makes with a request (both log-in forms) sends
``user_login_failed``; each is counted for the client's address (``LOGIN_FAILURE_RATE_LIMIT``, django-ratelimit's
counter in the Django cache, shared by every process through Redis). The failure that reaches the limit blocks the
address until its window ends, so 10/15m checks at most ten passwords from one address in 15 minutes. Every log-in
POST from a blocked address, right password or not, is answered 429 with the time to wait, before the form is read.
Unlike an API key, a password can be guessed, so a block must not tell a right guess from the others.
"""

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse

from ops.limits import AttemptLimit, blocked_page

LOGIN_FAILURES = AttemptLimit("login-failures", "LOGIN_FAILURE_RATE_LIMIT", blocks_when_reached=True)


@receiver(user_login_failed)
def count_failed_log_in(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    if request is not None:  # a check without a request (a shell, a command) is nobody's log-in attempt
        LOGIN_FAILURES.count(request)


class LoginLimitMiddleware:
    """Answers a log-in POST (console or admin) from a blocked address with 429, before the view reads the form."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Both log-in paths end in "login/": a string test first keeps this off every other request's path.
        path = request.path_info
        if (
            request.method == "POST"
            and path.endswith("login/")
            and path in _login_paths(getattr(request, "urlconf", None) or settings.ROOT_URLCONF)
        ):
            wait = LOGIN_FAILURES.blocked_for(request)
            if wait > 0:
                return blocked_page(request, "accounts/login_blocked.html", wait, "login")
        return self.get_response(request)


@lru_cache(maxsize=8)
def _login_paths(urlconf: str) -> frozenset[str]:
    """The log-in pages' paths under the request's URLconf, worked out once per URLconf (every POST asks)."""
    paths = set()
    for name in ("accounts:login", "admin:login"):
        try:
            paths.add(reverse(name, urlconf=urlconf))
        except NoReverseMatch:  # a URLconf without that page (tests mount their own)
            continue
    return frozenset(paths)
