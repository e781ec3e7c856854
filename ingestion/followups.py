"""POST /api/v1/mcp/callback: a long-running MCP tool's follow-ups (the `poke.mcp` protocol of the PyPI package).

When the assistant calls a connection's tool it sends X-Poke-Callback-Url (this endpoint) and X-Poke-Callback-Token
(a one-time token). The tool may later POST ``{"content": "...", "hasMore": true|false}`` here with
``Authorization: Bearer <token>``. The content goes into the thread as the tool's follow-up and is handed to the
assistant like a message, so it can go on; the answer carries ``nextToken`` for the next follow-up while more are
allowed (``null`` after the last one or at MCP_FOLLOW_UP_LIMIT). The follow-up keeps the key or trigger of the
message whose call it follows, and its words count as outside words (assistant/approval/rule.py): what it leads the
assistant to do waits for the person. Sooner than MCP_FOLLOW_UP_INTERVAL_SECONDS after
the previous follow-up: 429 with ``retryAfterMs`` (the token stays valid). A wrong, used or expired token: 401.
"""

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assistant.models import Action, FollowUpToken, ToolKind
from assistant.tools.mcp import TOKEN_PREFIX, digest_of, new_token_for
from conversations import outbound
from conversations.models import Endpoint
from ingestion import openapi, throttling
from ingestion.authentication import bearer_token
from ingestion.exceptions import InvalidBody, InvalidJson, Unauthorized
from ingestion.hotpath.recording import record_user_message
from ingestion.negotiation import JsonOnly
from ops.errors import error_body
from ops.request_id import request_id_of

MAX_CONTENT = 50_000
TOKEN_LIFETIME = timedelta(hours=24)


class InvalidFollowUpToken(Unauthorized):
    default_code = "invalid_follow_up_token"
    default_detail = (
        "This follow-up token is unknown, already used or expired. Each follow-up uses the nextToken of the "
        "previous answer; none is given after the last allowed follow-up."
    )


class FollowUpView(APIView):
    authentication_classes: list[Any] = []  # the one-time token is the authentication
    throttle_classes: list[Any] = []
    http_method_names = ["post", "options"]
    content_negotiation_class = JsonOnly

    @openapi.mcp_follow_up_endpoint
    def post(self, request: Request) -> Response:
        try:
            return self.follow_up(request)
        except Unauthorized:
            # Like a wrong API key: counted against the address, which is refused (429) once over the limit.
            throttling.count_failed_authentication(request)
            raise

    def follow_up(self, request: Request) -> Response:
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if not token.startswith(TOKEN_PREFIX) or len(token) > 100:
            raise InvalidFollowUpToken()
        found = (
            FollowUpToken.objects.select_related(
                "action__connection",
                "action__delivery__message__conversation__user",
                "action__delivery__message__api_key",
                "action__delivery__message__trigger",
            )
            .filter(digest=digest_of(token))
            .first()
        )
        now = timezone.now()
        if found is None or found.used_at is not None or found.created_at < now - TOKEN_LIFETIME:
            raise InvalidFollowUpToken()
        if not still_granted(found.action):
            raise InvalidFollowUpToken()
        action = found.action
        wait = _wait_seconds(action, now)
        if wait > 0:
            return _too_soon(wait)
        content, has_more = _read(request)
        with transaction.atomic():
            if not FollowUpToken.objects.filter(pk=found.pk, used_at__isnull=True).update(used_at=now):
                raise InvalidFollowUpToken()  # spent by a concurrent request with the same token
            Action.objects.filter(pk=action.pk).update(follow_ups=F("follow_ups") + 1, last_follow_up_at=now)
            count = action.follow_ups + 1
            origin = action.delivery.message
            message = record_user_message(
                user=action.delivery.message.conversation.user,
                endpoint=Endpoint.FOLLOW_UP,
                text=content,
                context={"tool": action.label, "action": action.pk, "followUp": count, "hasMore": has_more},
                request_id=request_id_of(request),
                # The origin of the call that asked for it, all the way down: what it leads to stays under the same
                # key's or trigger's rules and dies with it (assistant/approval/requests.py).
                api_key=origin.api_key,
                trigger=origin.trigger,
                notes_key_use=False,
            )
            outbound.written([message.pk])  # to the person's phone too, with the follow-up (the outbox)
            more = has_more and count < settings.MCP_FOLLOW_UP_LIMIT
            next_token = new_token_for(action) if more else None
        return Response(
            {"success": True, "message": "Follow-up recorded.", "id": message.public_id, "nextToken": next_token}
        )


def still_granted(action: Action) -> bool:
    """Whether what let the tool run still holds: its connection (removed or switched off: no), the account
    (deactivated: no) and the key or trigger that sent the message (revoked or expired: no). A token checked only
    for its own age outlived all three."""
    message = action.delivery.message
    connection = action.connection
    if action.kind == ToolKind.MCP and (connection is None or not connection.active):
        return False
    if not message.conversation.user.is_active:
        return False
    if message.api_key is not None and (message.api_key.is_revoked or message.api_key.is_expired()):
        return False
    return not (message.trigger is not None and message.trigger.revoked_at is not None)


def _wait_seconds(action: Action, now: Any) -> float:
    if action.last_follow_up_at is None:
        return 0.0
    elapsed = (now - action.last_follow_up_at).total_seconds()
    return max(settings.MCP_FOLLOW_UP_INTERVAL_SECONDS - elapsed, 0.0)


def _too_soon(wait: float) -> Response:
    milliseconds = max(math.ceil(wait * 1000), 1)
    body = error_body(
        "rate_limited",
        f"Follow-ups of one tool call come at most every {settings.MCP_FOLLOW_UP_INTERVAL_SECONDS:g} s; "
        f"send this one again in {milliseconds} ms with the same token.",
    )
    return Response({**body, "retryAfterMs": milliseconds}, status=429, headers={"Retry-After": str(math.ceil(wait))})


def _read(request: Request) -> tuple[str, bool]:
    body = request.data
    if request.stream is None:
        raise InvalidJson('The body is empty. Send {"content": "...", "hasMore": false}.')
    if not isinstance(body, dict):
        raise InvalidBody('Send a JSON object: {"content": "...", "hasMore": false}.')
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidBody('"content" must be a non-blank string.')
    if len(content) > MAX_CONTENT:
        raise InvalidBody(f'"content" is longer than {MAX_CONTENT} characters.')
    has_more = body.get("hasMore", False)
    if not isinstance(has_more, bool):
        raise InvalidBody('"hasMore", when sent, must be true or false.')
    from ingestion import body as body_rules

    body_rules.check_storable(content)
    return content, has_more
