"""Webhook triggers over HTTP (docs/howto/webhooks.md):

- ``POST /api/v1/api-keys/webhook`` (a V2 API key): make a trigger from a condition and an action; the answer
  carries its URL and token (shown this once).
- ``GET /api/v1/api-keys/webhook/{triggerId}/log`` (a V2 API key with webhooks:manage): the trigger's delivery log.
- ``POST /api/v1/inbound/webhook/{triggerId}`` (or ``/api/v1/inbound/webhook``, as the Poke SDK's URL has it):
  ``Authorization: Bearer <webhook token>``, or for senders that cannot set that header (GitHub) an
  ``X-Hub-Signature-256`` made with the trigger's signing secret. The action lands in the owner's thread as their
  message with the posted JSON as context, through the same write path, limits, idempotency and errors as
  ``/api/v1/inbound/api-message``.
"""

import re
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.models import Endpoint
from ingestion import body as body_rules
from ingestion import openapi, throttling, trigger_log
from ingestion.authentication import AnyKeyAuthentication, V2KeyAuthentication, bearer_token, confirmed_key
from ingestion.exceptions import (
    AccountDisabled,
    InvalidBody,
    InvalidJson,
    InvalidWebhookSignature,
    InvalidWebhookToken,
    LengthRequired,
    MissingAuthorization,
    NotFound,
    PayloadTooLarge,
    RevokedWebhookTrigger,
    TriggerLimitReached,
    Unauthorized,
)
from ingestion.hotpath.recording import record_user_message
from ingestion.idempotency import idempotent
from ingestion.models import FiringOutcome
from ingestion.negotiation import JsonOnly
from ingestion.throttling import WebhookTriggerRateThrottle
from keys.models import ApiKey
from keys.scopes import Scope
from ops.http import REPLAYED_HEADER, declared_length
from ops.request_id import request_id_of
from triggers import services
from triggers.models import WebhookTrigger

_TRIGGER_ID = re.compile(r"trg_[0-9A-Za-z]{20}")
_REFUSED_TRIGGER = "refused_trigger"  # the request's attribute: a trigger found by its token, then refused
_BLOCKED = "rate_limited"  # a limit's refusal (throttling.py); unauthenticated: the failed-authentication one
RECEIVED = "Webhook received"
REPEATED_DELIVERY = (
    "This delivery was received before (the same X-GitHub-Delivery or signed body); nothing was recorded."
)


class CreateTriggerView(APIView):
    authentication_classes = [V2KeyAuthentication]
    http_method_names = ["post", "options"]
    content_negotiation_class = JsonOnly
    required_scopes = {"POST": Scope.WEBHOOKS_MANAGE}

    @openapi.create_trigger_endpoint
    def post(self, request: Request) -> Response:
        key = confirmed_key(request, self)
        body = _json_body(request, '{"condition": "When a new order is placed", "action": "Send me a summary"}')
        if not isinstance(body, dict):
            raise InvalidBody('The body must be a JSON object: {"condition": "…", "action": "…"}.')
        body_rules.check_storable(body)
        for name in ("condition", "action"):
            if name not in body:
                raise InvalidBody(f'\'{name}\' is required: the body is {{"condition": "…", "action": "…"}}.')
        signed = body.get("signed", False)
        if not isinstance(signed, bool):
            raise InvalidBody("'signed' must be true or false.")
        try:
            trigger, token, secret = services.create_trigger(
                key.owner, body["condition"], body["action"], created_with=key, signed=signed
            )
        except services.InvalidTrigger as error:
            raise InvalidBody(str(error)) from None
        except services.TriggerLimitReached as error:
            raise TriggerLimitReached(str(error)) from None
        answer = {
            "success": True,
            "triggerId": trigger.public_id,
            "webhookUrl": webhook_url(request, trigger),
            "webhookToken": token,
            "condition": trigger.condition,
            "action": trigger.action,
            "createdAt": trigger.created_at.isoformat().replace("+00:00", "Z"),
        }
        if secret is not None:
            answer["signingSecret"] = secret
        response = Response(answer, status=201)
        response["Cache-Control"] = "no-store"
        return response


class TriggerLogView(APIView):
    """A trigger's delivery log (ingestion/trigger_log.py), for a key of its owner's account."""

    authentication_classes = [V2KeyAuthentication]
    http_method_names = ["get", "head", "options"]
    content_negotiation_class = JsonOnly
    required_scopes = {"GET": Scope.WEBHOOKS_MANAGE}

    @openapi.trigger_log_endpoint
    def get(self, request: Request, trigger_id: str) -> Response:
        key = confirmed_key(request, self)
        found = _TRIGGER_ID.fullmatch(trigger_id) is not None
        trigger = WebhookTrigger.objects.filter(public_id=trigger_id, owner_id=key.owner_id).first() if found else None
        if trigger is None:
            raise NotFound("No webhook trigger of this key's account has this id. Use the triggerId it was made with.")
        firings = [_firing(entry) for entry in trigger_log.recent(trigger)]
        return Response({"success": True, "triggerId": trigger.public_id, "firings": firings})


def _firing(entry: trigger_log.Line) -> dict[str, Any]:
    line = entry.line
    message = line.message
    status = None
    if entry.awaiting_approval:
        status = "awaiting_approval"
    elif message is not None and getattr(message, "delivery", None) is not None:
        status = str(message.delivery.status)
    elif message is not None and message.outcome:  # its delivery was pruned: the final status stays on the message
        status = message.outcome
    return {
        "at": _iso(line.at),
        "lastAt": _iso(line.last_at),
        "outcome": str(line.outcome),
        "code": line.code or None,
        "count": entry.count,
        "summary": line.summary,
        "messageId": message.public_id if message is not None else None,
        "deliveryStatus": status,
    }


def _iso(moment: Any) -> str:
    return str(moment.isoformat().replace("+00:00", "Z"))


def webhook_url(request: Any, trigger: WebhookTrigger) -> str:
    return request.build_absolute_uri(reverse("webhook-trigger", args=[trigger.public_id]))


def _json_body(request: Request, example: str) -> Any:
    data = request.data
    if request.stream is None:
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            raise LengthRequired()
        raise InvalidJson(f"The body is empty. Send a JSON object, for example {example}.")
    return data


class WebhookTriggerAuthentication(BaseAuthentication):
    """The trigger's token as a Bearer credential, or (with the trigger's id in the URL and no Authorization header)
    GitHub's X-Hub-Signature-256 over the exact body. Failures count towards the client address's
    failed-authentication limit, like a wrong API key."""

    def authenticate(self, request: Request) -> tuple[User, WebhookTrigger]:
        try:
            return self.identify(request)
        except Unauthorized:
            throttling.count_failed_authentication(request)
            raise

    def identify(self, request: Request) -> tuple[User, WebhookTrigger]:
        trigger_id = (request.parser_context or {}).get("kwargs", {}).get("trigger_id")
        header = request.META.get("HTTP_AUTHORIZATION")
        signature = request.META.get("HTTP_X_HUB_SIGNATURE_256", "")
        if trigger_id is not None and not _TRIGGER_ID.fullmatch(trigger_id):
            raise InvalidWebhookToken("No webhook trigger has this URL. Use the webhookUrl given when it was made.")
        if _signed(request):
            trigger = WebhookTrigger.objects.select_related("owner").filter(public_id=trigger_id).first()
            if trigger is None or not services.signature_matches(trigger, _raw_body(request), signature):
                raise InvalidWebhookSignature()
        else:
            if not header:
                raise MissingAuthorization(
                    "Missing Authorization header. Send 'Authorization: Bearer <webhook token>', the webhookToken "
                    "given when the trigger was made (or sign the body with X-Hub-Signature-256)."
                )
            trigger = services.find_by_token(bearer_token(header))
            if trigger is None or (trigger_id is not None and trigger.public_id != trigger_id):
                raise InvalidWebhookToken()
        if trigger.is_revoked or not trigger.owner.is_active:
            setattr(request, _REFUSED_TRIGGER, trigger)  # for its delivery log, even on the URL that names none
            if trigger.is_revoked:
                raise RevokedWebhookTrigger()
            raise AccountDisabled("The account this webhook trigger belongs to is deactivated.")
        return trigger.owner, trigger

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="webhooks"'


class KeyOrWebhookTokenAuthentication(AnyKeyAuthentication):
    """The receipts endpoint: any API key, as before, or a webhook trigger's token, which reads the receipts of the
    messages its own firings recorded (and nothing else)."""

    def authenticate(self, request: Request) -> tuple[User, ApiKey | WebhookTrigger]:  # type: ignore[override]
        header = request.META.get("HTTP_AUTHORIZATION") or ""
        if header[7:].startswith(services.TOKEN_PREFIX) and header[:7].lower() == "bearer ":
            return WebhookTriggerAuthentication().authenticate(request)
        return super().authenticate(request)


def _signed(request: Request) -> bool:
    """Whether the request authenticates with X-Hub-Signature-256 (on the trigger's own URL, no Authorization)."""
    trigger_id = (request.parser_context or {}).get("kwargs", {}).get("trigger_id")
    return bool(
        trigger_id and request.META.get("HTTP_X_HUB_SIGNATURE_256") and not request.META.get("HTTP_AUTHORIZATION")
    )


def _raw_body(request: Request) -> bytes:
    """The exact bytes that were signed, read no further than the body size limit."""
    limit = settings.INGEST_MAX_BODY_BYTES
    if (declared_length(request) or 0) > limit:
        raise PayloadTooLarge(f"The body is larger than the limit of {limit} bytes.")
    return request.body


class FireTriggerView(APIView):
    authentication_classes = [WebhookTriggerAuthentication]
    throttle_classes = [WebhookTriggerRateThrottle]
    http_method_names = ["post", "options"]
    content_negotiation_class = JsonOnly
    endpoint = Endpoint.WEBHOOK_TRIGGER

    @openapi.fire_trigger_endpoint
    @idempotent
    def post(self, request: Request, trigger_id: str | None = None) -> Response:
        trigger = request.auth
        assert isinstance(trigger, WebhookTrigger)
        payload = body_rules.trigger_payload(_json_body(request, '{"order": 1042, "total": "€38.50"}'))
        event = request.META.get("HTTP_X_GITHUB_EVENT")
        summary = trigger_log.summary_of(payload, event)
        if event == "ping":
            # GitHub's hello when a webhook is set up: acknowledged, but no instruction for the assistant.
            self.log_as = (FiringOutcome.PING, summary)
            return Response({"success": True, "message": "GitHub ping received; nothing was recorded."})
        logged = trigger_log.enabled()
        with transaction.atomic():
            delivery_id = request.META.get("HTTP_X_GITHUB_DELIVERY")
            if not services.first_receipt(trigger, delivery_id, _raw_body(request) if _signed(request) else None):
                self.log_as = (FiringOutcome.DUPLICATE, summary)
                return Response({"success": True, "message": REPEATED_DELIVERY})
            message = record_user_message(
                user=trigger.owner,
                endpoint=Endpoint.WEBHOOK_TRIGGER,
                text=services.message_text(trigger, payload, event),
                context=payload,
                trigger=trigger,
                request_id=request_id_of(request),
                log_line=trigger_log.accepted_line(trigger, summary) if logged else None,
                log_trim=trigger_log.trim_with_insert(trigger.pk) if logged else None,
            )
            services.note_fired(trigger)
        self.log_as = None  # logged with the message
        return Response({"success": True, "message": RECEIVED, "id": message.public_id})

    log_as: tuple[FiringOutcome, str] | None = None

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Log every answer that recorded no message in the trigger's delivery log (ingestion/trigger_log.py), when
        it can be told which trigger the request was for: its token or signature said so, or its URL names one."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if trigger_log.enabled():
            self._log(request, response)
        return response

    def _log(self, request: Request, response: Any) -> None:
        # Never authenticates here: only what authentication found (a trigger whose token or signature was right,
        # even if it was then refused as revoked or its account as deactivated).
        trigger = getattr(request, "_auth", None) or getattr(request, _REFUSED_TRIGGER, None)
        trigger = trigger if isinstance(trigger, WebhookTrigger) else None
        url_id = self.kwargs.get("trigger_id")
        if trigger is None and not (url_id and _TRIGGER_ID.fullmatch(url_id)):
            return  # no trigger to log it for (a wrong token on the token-only URL names none)
        if response.get(REPLAYED_HEADER):
            outcome, code, summary = FiringOutcome.DUPLICATE, "", "Idempotency-Key seen before: the first answer again"
        elif response.status_code >= 400:
            data = getattr(response, "data", None)
            code = str(data.get("code", "")) if isinstance(data, dict) else ""
            if trigger is None and code == _BLOCKED:
                # The address is blocked for failing authentication, and only the URL names a trigger: logging it
                # would cost the lookup and cache entry that the block exists to spare (a flood of random ids).
                return
            outcome, summary = FiringOutcome.REFUSED, ""
        elif self.log_as is not None:
            (outcome, summary), code = self.log_as, ""
        else:
            return  # accepted (its line went with its message), or an OPTIONS request
        trigger_log.note(outcome, trigger=trigger, public_id=url_id, code=code, summary=summary)


class FireTriggerByTokenView(FireTriggerView):
    """POST /api/v1/inbound/webhook, the URL the Poke SDK's triggers have: the token alone names the trigger."""

    @openapi.fire_trigger_by_token_endpoint
    def post(self, request: Request, trigger_id: str | None = None) -> Response:
        return super().post(request, trigger_id)
