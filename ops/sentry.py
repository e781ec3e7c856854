"""Error reporting to Sentry, only when SENTRY_DSN is set. SENTRY_ENVIRONMENT and SENTRY_RELEASE are read by the
SDK itself. Events never carry the Authorization header, cookies, request bodies (the messages people send), local
variables, personal data or a password reset link's token: the SDK is told not to collect them, and `scrub_event`
removes them again in case an integration adds them anyway."""

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import sentry_sdk
from sentry_sdk.integrations.django import DjangoIntegration

from ops.redaction import loggable_path

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def scrub_event(event: Any, hint: Any) -> Any:
    request = event.get("request") or {}
    url = request.get("url")
    if isinstance(url, str):  # a password reset link's path holds its token (ops/redaction.py)
        parts = urlsplit(url)
        request["url"] = urlunsplit(parts._replace(path=loggable_path(parts.path)))
    headers = request.get("headers")
    if isinstance(headers, dict):
        request["headers"] = {
            name: ("[Filtered]" if name.lower() in _SECRET_HEADERS else value) for name, value in headers.items()
        }
    request.pop("data", None)
    request.pop("cookies", None)
    return event


def init_sentry(dsn: str, *, traces_sample_rate: float = 0.0) -> None:
    sentry_sdk.init(
        dsn=dsn,
        integrations=[DjangoIntegration()],
        # Collect the exception, the stack and the URL; not who the user is, not their cookies or query strings,
        # not the bodies (the messages people send), not local variables (a frame may hold a key being checked).
        data_collection={
            "user_info": False,
            "cookies": {"mode": "off"},
            "http_headers": {"request": {"mode": "denylist", "terms": ["authorization", "cookie"]}},
            "http_bodies": [],
            "url_query_params": {"mode": "off"},
            "database_query_data": False,
            "stack_frame_variables": False,
        },
        max_request_body_size="never",
        traces_sample_rate=traces_sample_rate,
        before_send=scrub_event,
    )
