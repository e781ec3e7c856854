"""The JSON calls the non-Twilio adapters make, through the assistant's small client (assistant/http.py: keep-alive
per thread, one deadline for the whole exchange, never a URL in an error text: Telegram's bot token is in its
URLs' path, BlueBubbles' password in its query). Failures become SendError."""

import json
from typing import Any

from django.conf import settings

from assistant.http import AnswerLost, post_json, printable
from assistant.outcomes import DeliveryFailure, TransientFailure
from channels.adapters.base import SendError

# Statuses that say "not now" rather than "never".
_RETRYABLE = {408, 425, 429}


def call(provider: str, url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    """POST ``body`` as JSON and return the decoded JSON answer of a 2xx; SendError otherwise (retryable when the
    provider did not answer, or answered 5xx, 408, 425 or 429)."""
    try:
        response = post_json(
            url,
            json.dumps(body).encode(),
            headers or {},
            settings.CHANNEL_TIMEOUT_SECONDS,
            max_bytes=settings.CHANNEL_MAX_ANSWER_BYTES,
            server=provider,
        )
    except TransientFailure as error:
        # No answer to a request that went out: the provider may have sent the text (channels/adapters/unknown.py).
        raise SendError(f"{provider}: {error}", retryable=True, unknown=isinstance(error, AnswerLost)) from None
    except DeliveryFailure as error:
        raise SendError(f"{provider}: {error}", retryable=False) from None
    try:
        answer = json.loads(response.body) if response.body else None
    except ValueError:
        answer = None
    if 200 <= response.status < 300:
        if answer is None:
            raise SendError(f"{provider} answered HTTP {response.status} without JSON.", retryable=True)
        return answer
    detail = printable(_error_text(answer)) if answer is not None else ""
    text = f"{provider} answered HTTP {response.status}" + (f": {detail}" if detail else ".")
    raise SendError(text, retryable=response.status >= 500 or response.status in _RETRYABLE)


def _error_text(answer: Any) -> str:
    """The human part of a provider's error body: Meta's error.message, Telegram's description, BlueBubbles'
    error.message or message."""
    if not isinstance(answer, dict):
        return ""
    error = answer.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    for name in ("description", "message"):
        if isinstance(answer.get(name), str):
            return str(answer[name])
    return ""
