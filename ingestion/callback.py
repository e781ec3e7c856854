"""POST /api/v1/assistant/replies: an assistant runtime that answered a webhook with 202 sends its reply here,
signed the Standard Webhooks way with the same whsec_ secret (docs/howto/assistant-backend.md#the-callback-endpoint)."""

import io
import time
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant import signing
from conversations.models import Message, Role
from delivery import lifecycle
from ingestion import body as body_rules
from ingestion import openapi
from ingestion.exceptions import (
    InvalidBody,
    InvalidSignature,
    MessageNotFound,
    NotFound,
    PayloadTooLarge,
    ReplyAlreadyRecorded,
    TimestampOutOfTolerance,
    UnsupportedMediaType,
)
from ingestion.negotiation import JsonOnly
from ingestion.parsers import StrictJSONParser
from ops.http import declared_length

_EXAMPLE = 'for example {"message_id": "msg_…", "reply": "Done: reminder set for 5pm."}'


class AssistantReplyView(APIView):
    authentication_classes: list[Any] = []  # the signature is the authentication, checked before the body is read
    http_method_names = ["post", "options"]
    content_negotiation_class = JsonOnly

    @openapi.callback_endpoint
    def post(self, request: Request) -> Response:
        if not settings.ASSISTANT_WEBHOOK_KEY:
            raise NotFound("There is no assistant callback on this server (no ASSISTANT_WEBHOOK_SECRET is set).")
        raw = _raw_body(request)
        try:
            webhook_id = signing.verify(
                settings.ASSISTANT_WEBHOOK_KEY,
                request.headers,
                raw,
                now=int(time.time()),
                tolerance=settings.ASSISTANT_CALLBACK_TOLERANCE_SECONDS,
            )
        except signing.TimestampError as error:
            raise TimestampOutOfTolerance(str(error)) from None
        except signing.SignatureError as error:
            raise InvalidSignature(str(error)) from None
        if request.content_type.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaType("Send the reply as JSON with the header 'Content-Type: application/json'.")
        message_id, reply = _reply_of(StrictJSONParser().parse(io.BytesIO(raw), request.content_type))
        message = Message.objects.filter(public_id=message_id, role=Role.USER, delivery__isnull=False).first()
        if message is None:
            raise MessageNotFound(f"No message has the id {message_id[:40]!r}.")
        try:
            delivery, new = lifecycle.record_callback_reply(message, reply, webhook_id)
        except lifecycle.ReplyAlreadyRecorded:
            raise ReplyAlreadyRecorded() from None
        assert delivery.reply is not None
        text = "Reply recorded." if new else "This reply was already recorded; nothing changed."
        return Response({"success": True, "message": text, "id": delivery.reply.public_id})


def _raw_body(request: Request) -> bytes:
    """The exact bytes that were signed, read no further than the body size limit."""
    limit = settings.INGEST_MAX_BODY_BYTES
    if (declared_length(request) or 0) > limit:
        raise PayloadTooLarge(f"The body is larger than the limit of {limit} bytes.")
    return request.body


def _reply_of(body: Any) -> tuple[str, str]:
    if not isinstance(body, dict):
        raise InvalidBody(f"The body must be a JSON object, {_EXAMPLE}.")
    message_id, reply = body.get("message_id"), body.get("reply")
    if not isinstance(message_id, str) or not message_id:
        raise InvalidBody(f"The member 'message_id' must be the id of the message you are answering, {_EXAMPLE}.")
    if not isinstance(reply, str) or not reply.strip():
        raise InvalidBody(f"The member 'reply' must be a non-blank string, {_EXAMPLE}.")
    body_rules.check_storable(body)
    return message_id, reply
