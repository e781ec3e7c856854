"""Paths that carry a secret, written as their route wherever a path is recorded: the app's access log and every
other log line (config/settings.py LOGGING), gunicorn's logs (gunicorn.conf.py) and error reports (ops/sentry.py).

Django's password reset link, /reset/<uidb64>/<token>/ (accounts/urls.py), holds the reset token until the view
moves it into the session and redirects to /reset/<uidb64>/set-password/; whoever reads the token can set the
account's password within the hour. This module imports nothing from Django, so gunicorn's master can use it.
"""

import logging
import re

# The route's own placeholder, "set-password", is not a token. The trailing slash is optional: a link requested
# without it is redirected (APPEND_SLASH), and that request's path holds the token just the same.
_RESET_LINK = re.compile(r"^/reset/[^/]+/(?!set-password/?$)[^/]+/?$")
_RESET_LINK_IN_TEXT = re.compile(r"/reset/[^/\s]+/(?!set-password(?:[/\s]|$))[^/\s]+/?")
RESET_LINK_ROUTE = "/reset/<uidb64>/<token>/"


def is_reset_link(path: str) -> bool:
    return _RESET_LINK.match(path) is not None


def loggable_path(path: str) -> str:
    """The path as logs may keep it: a reset link becomes its route, any other path is cut at 200 characters."""
    return RESET_LINK_ROUTE if is_reset_link(path) else path[:200]


class RedactResetLinks(logging.Filter):
    """For log handlers: a reset link in a record's message becomes its route. Django's "Internal Server Error:
    <path>" line (django.request) and gunicorn's "Error handling request <uri>" name the path."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _RESET_LINK_IN_TEXT.sub(RESET_LINK_ROUTE, message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
