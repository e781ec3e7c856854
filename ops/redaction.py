"""Paths that carry a secret, written as their route wherever a path is recorded: the app's access log and every
other log line (config/settings.py LOGGING), gunicorn's logs (gunicorn.conf.py) and error reports (ops/sentry.py).

Django's password reset link, /reset/<uidb64>/<token>/ (console/urls.py), holds the reset token until the view
moves it into the session and redirects to /reset/<uidb64>/set-password/; whoever reads the token can set the
account's password within the hour. BlueBubbles' webhook URL, /channels/bluebubbles/webhook?secret=<secret>
(channels/adapters/bluebubbles.py: BlueBubbles cannot sign), holds the secret that lets anyone post messages as any
linked iMessage sender; no log keeps query strings, and a message that quotes the URL has the secret blanked. The
CLI's log-in poll, /api/v1/cli-auth/poll/<device_code>
(ingestion/cli_auth.py), holds the device code that collects a new API key once the person approves.

Beyond those routes, any path segment shaped like one of our tokens is redacted wherever it appears, on paths that
route or not (`/api/v2/cli-auth/poll/pdc_…`, an extra segment, a doubled slash, `%5F` for the underscore): a client
that puts a secret in the wrong URL must not leave it in our logs either. The shapes: our prefixed secrets (keys
pk_/psk_, trigger tokens pwh_, signing secrets pws_, device codes pdc_, follow-up tokens pfu_, whsec_) and Django's
password reset token (base36 time, a dash, hex). Ids (msg_, mcp_, trg_, …) are not secrets and stay.

This module imports nothing from Django, so gunicorn's master can use it.
"""

import logging
import re

# The route's own placeholder, "set-password", is not a token. The trailing slash is optional: a link requested
# without it is redirected (APPEND_SLASH), and that request's path holds the token just the same.
_RESET_LINK = re.compile(r"^/reset/[^/]+/(?!set-password/?$)[^/]+/?$")
_RESET_LINK_IN_TEXT = re.compile(r"/reset/[^/\s]+/(?!set-password(?:[/\s]|$))[^/\s]+/?")
RESET_LINK_ROUTE = "/reset/<uidb64>/<token>/"
_DEVICE_POLL = re.compile(r"^/api/v1/cli-auth/poll/[^/]+/?$")
_DEVICE_POLL_IN_TEXT = re.compile(r"/api/v1/cli-auth/poll/[^/\s?\"']+")
DEVICE_POLL_ROUTE = "/api/v1/cli-auth/poll/<device_code>"
_BLUEBUBBLES_SECRET_IN_TEXT = re.compile(r"(/channels/bluebubbles/webhook\?(?:[^\s\"'#]*&)?secret=)[^&\s\"'#]+")
REDACTED = "[redacted]"
_SECRET_PREFIXES = ("pk", "psk", "pwh", "pws", "pdc", "pfu", "whsec")
_TOKEN_SEGMENT = re.compile(
    r"(?<=/)(?:"
    rf"(?P<prefix>{'|'.join(_SECRET_PREFIXES)})(?:_|%5[Ff])[A-Za-z0-9_\-]{{16,}}"  # ours: a prefix, then the secret
    r"|[0-9a-z]{1,13}-[0-9a-f]{20,128}"  # Django's reset token: base36 timestamp, dash, HMAC in hex
    r")(?=[/?#;\s\"']|$)"
)


def _redacted_segment(found: re.Match[str]) -> str:
    prefix = found.group("prefix")
    return f"{prefix}_{REDACTED}" if prefix else REDACTED


def redact_tokens(text: str) -> str:
    """Every path segment in text that has the shape of one of our secrets, replaced by [redacted]."""
    return _TOKEN_SEGMENT.sub(_redacted_segment, text)


def is_reset_link(path: str) -> bool:
    return _RESET_LINK.match(path) is not None


def secret_route(path: str) -> str | None:
    """What to write instead of a path that carries a secret (its route, or the path with the secret redacted), or
    None for any other path."""
    if is_reset_link(path):
        return RESET_LINK_ROUTE
    if _DEVICE_POLL.match(path):
        return DEVICE_POLL_ROUTE
    redacted = redact_tokens(path)
    return redacted[:200] if redacted != path else None


def loggable_path(path: str) -> str:
    """The path as logs may keep it: a path with a secret becomes its route or loses the secret; any path is cut at
    200 characters (after the redaction, so that no part of a secret is left)."""
    return secret_route(path) or path[:200]


_QUERY_SECRET = re.compile(r"(^|&)secret=[^&]*")
_QUERY_SECRET_PATHS = ("/channels/bluebubbles/webhook",)


def redact_query(path: str, query: str) -> str:
    """A query string as logs may keep it: the ``secret`` of a path that takes one in its query is blanked."""
    if path.rstrip("/") not in _QUERY_SECRET_PATHS:
        return query
    return _QUERY_SECRET.sub(rf"\g<1>secret={REDACTED}", query)


def redact_text(message: str) -> str:
    """A text with every secret-carrying path or URL above made harmless."""
    message = _DEVICE_POLL_IN_TEXT.sub(DEVICE_POLL_ROUTE, _RESET_LINK_IN_TEXT.sub(RESET_LINK_ROUTE, message))
    return redact_tokens(_BLUEBUBBLES_SECRET_IN_TEXT.sub(rf"\g<1>{REDACTED}", message))


class RedactResetLinks(logging.Filter):
    """For log handlers: a reset link in a record's message becomes its route. Django's "Internal Server Error:
    <path>" line (django.request) and gunicorn's "Error handling request <uri>" name the path."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
