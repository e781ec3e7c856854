"""A signed outgoing webhook to an external assistant runtime (Standard Webhooks).

The runtime answers 2xx with {"reply": "..."} to reply at once, or 202 (or 2xx without a reply) to reply later
through POST /api/v1/assistant/replies. 5xx, 408, 425, 429, timeouts and refused connections are retried with
backoff; any other 4xx, a redirect or a reply we cannot read fails the delivery without retrying (the runtime
got the message but its answer is unusable: retrying would make it act twice).
"""

import json
import time
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.utils import timezone

from assistant import http, signing
from assistant.conversation import AssistantRequest
from assistant.outcomes import Accepted, Outcome, PermanentFailure, Reply, storable_reply

SERVICE = "The assistant webhook"
EVENT_TYPE = "message.received"


def payload(request: AssistantRequest) -> dict[str, Any]:
    """What the runtime receives. It names the key (id, name, hint) but never carries the key itself."""
    return {
        "type": EVENT_TYPE,
        "timestamp": timezone.now().isoformat(),
        "data": {
            "message": {
                "id": request.message_id,
                "text": request.text,
                "context": request.context,
                "source": request.source,
                "created_at": request.created_at,
            },
            "thread": [asdict(entry) for entry in request.thread],
            "user": {"id": request.user_id},
            "key": asdict(request.key) if request.key is not None else None,
            "attempt": request.attempt,
        },
    }


def deliver(request: AssistantRequest) -> Outcome:
    body = json.dumps(payload(request), ensure_ascii=False, separators=(",", ":")).encode()
    # The webhook-id is the message id, the same on every retry, so that the runtime can drop duplicates.
    headers = signing.sign(settings.ASSISTANT_WEBHOOK_KEY, request.message_id, int(time.time()), body)
    response = http.post_to_runtime(settings.ASSISTANT_WEBHOOK_URL, body, headers)
    http.raise_for_status(response, SERVICE, _snippet(response.body))
    return _outcome(response)


def _outcome(response: http.Response) -> Outcome:
    if not response.body.strip():
        return Accepted()
    try:
        answer = json.loads(response.body)
    except (UnicodeDecodeError, ValueError):
        raise PermanentFailure(f"{SERVICE} answered HTTP {response.status} with a body that is not JSON.") from None
    if not isinstance(answer, dict):
        raise PermanentFailure(f"{SERVICE} answered with JSON that is not an object.")
    reply = answer.get("reply")
    if reply is None:
        return Accepted()
    text = storable_reply(reply)
    if text is None:
        raise PermanentFailure(f"{SERVICE} answered with a 'reply' that is not a non-blank string we can store.")
    return Reply(text)


def _snippet(body: bytes) -> str:
    """The start of an error body, for staff: printable text only, short."""
    return http.printable(body[:300].decode("utf-8", errors="replace"))
