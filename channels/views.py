"""The providers' callbacks under /channels/ (docs/design.md#channels). Each view, in this order: refuses a method,
size or content type the provider never sends (405, 413 unread, 415); checks the provider's signature or secret
before reading anything else (403 ``invalid_channel_signature``, nothing recorded); then hands the statuses to
channels.status and each message to channels.inbound. A body the provider signed but we cannot read is 400, never a
500. A provider's retry of a message already recorded is answered 200 (else it would retry on), its JSON saying
``duplicates``.

No session, no CSRF token: the providers are not browsers; their signature is what authenticates them."""

import logging
from collections import Counter
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from twilio.twiml.messaging_response import MessagingResponse

from channels import inbound, status
from channels.adapters import adapter_for, configured, twilio, whatsapp_cloud
from channels.adapters.base import Adapter, BadRequest, Channel, VerificationFailed
from channels.adapters.payloads import is_reasonable_id
from ops.errors import json_error
from ops.http import declared_length
from ops.request_id import request_id_of

logger = logging.getLogger(__name__)

_FORM = "application/x-www-form-urlencoded"
_JSON = "application/json"


def _refusal(request: HttpRequest, content_type: str) -> HttpResponse | None:
    """405, 413 or 415 before the body is read; None for a request worth verifying."""
    if request.method != "POST":
        return json_error("method_not_allowed", "Only POST is accepted here.", headers={"Allow": "POST"})
    length = declared_length(request)
    if length is None:
        return json_error("length_required", "Send the body with a Content-Length.")
    if length > settings.CHANNEL_MAX_BODY_BYTES:
        return json_error(
            "payload_too_large", f"The body is larger than the limit of {settings.CHANNEL_MAX_BODY_BYTES} bytes."
        )
    given = (request.content_type or "").lower()
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if given != content_type or charset not in ("utf-8", "utf8"):
        return json_error("unsupported_media_type", f"This endpoint takes {content_type} in UTF-8.")
    return None


def _verified(request: HttpRequest, adapter: Adapter) -> HttpResponse | None:
    try:
        adapter.verify(request)
    except VerificationFailed as failure:
        logger.warning("channel callback refused (%s): %s", adapter.channel, failure)
        return json_error("invalid_channel_signature", "The request does not carry the provider's valid signature.")
    except BadRequest as error:
        return json_error(error.code, error.message)
    return None


def _handle(
    request: HttpRequest,
    adapters: list[Adapter],
    content_type: str,
    answer: Callable[[Counter[str]], HttpResponse],
    *,
    messages: bool = True,
    statuses: bool = True,
) -> HttpResponse:
    refusal = _refusal(request, content_type)
    if refusal is not None:
        return refusal
    if not adapters:
        return json_error("channel_not_offered", "This server is not configured for this provider.")
    refusal = _verified(request, adapters[0])  # adapters of one endpoint share the provider's credentials
    if refusal is not None:
        return refusal
    outcomes: Counter[str] = Counter()
    try:
        for adapter in adapters:
            updates = [u for u in adapter.parse_statuses(request) if is_reasonable_id(u.provider_message_id, 128)]
            if updates and statuses:
                status.record(updates)
            for message in adapter.parse_inbound(request) if messages else []:
                if not (is_reasonable_id(message.provider_message_id, 128) and is_reasonable_id(message.address, 64)):
                    # Left out, the others taken: answering 400 after recording the batch's first messages would
                    # have the provider retry the whole batch for hours, and this one can never be taken.
                    logger.warning("%s: a message with an id or sender no provider sends was left out", adapter.channel)
                    outcomes["refused"] += 1
                    continue
                received = inbound.receive(adapter.channel, message, request_id_of(request))
                outcomes[received.outcome] += 1
    except BadRequest as error:
        return json_error(error.code, error.message)
    return answer(outcomes)


def _ok(outcomes: Counter[str]) -> HttpResponse:
    # 200 even for a retry of what was recorded (Meta and Telegram retry anything else for hours), saying so.
    answer = {"success": True, "recorded": outcomes["recorded"], "duplicates": outcomes["duplicate"]}
    if outcomes["refused"]:
        answer["refused"] = outcomes["refused"]  # messages left out: an id or sender no provider sends
    return JsonResponse(answer)


# Twilio reads the answer to an incoming message as TwiML: an empty <Response/> sends nothing back (replies go out
# through the API, from the outbox). Always the same document: written once (the library builds it through an XML
# tree, a tenth of a callback's own work).
_EMPTY_TWIML = str(MessagingResponse())


def _empty_twiml(outcomes: Counter[str]) -> HttpResponse:
    return HttpResponse(_EMPTY_TWIML, content_type="text/xml")


def _twilio_adapters() -> list[Adapter]:
    return [
        adapter
        for channel in (Channel.SMS, Channel.WHATSAPP)
        if isinstance(adapter := configured().get(channel), twilio.TwilioAdapter)
    ]


@csrf_exempt
def twilio_inbound(request: HttpRequest) -> HttpResponse:
    return _handle(request, _twilio_adapters(), _FORM, _empty_twiml, statuses=False)


@csrf_exempt
def twilio_status(request: HttpRequest) -> HttpResponse:
    # One adapter reads the statuses of both channels' sends: the message id says which send it was.
    return _handle(request, _twilio_adapters()[:1], _FORM, _empty_twiml, messages=False)


@csrf_exempt
def whatsapp_webhook(request: HttpRequest) -> HttpResponse:
    adapter = adapter_for(Channel.WHATSAPP)
    cloud = adapter if isinstance(adapter, whatsapp_cloud.WhatsAppCloudAdapter) else None
    if request.method == "GET":
        if cloud is None:
            return json_error("channel_not_offered", "This server is not configured for this provider.")
        challenge = whatsapp_cloud.verification_answer(
            request.GET.get("hub.mode", ""),
            request.GET.get("hub.verify_token", ""),
            request.GET.get("hub.challenge", ""),
        )
        if challenge is None or len(challenge) > 256 or not challenge.isprintable():
            return json_error("invalid_channel_signature", "The verify token does not match.")
        return HttpResponse(challenge, content_type="text/plain")
    return _handle(request, [cloud] if cloud else [], _JSON, _ok)


@csrf_exempt
def telegram_webhook(request: HttpRequest) -> HttpResponse:
    adapter = adapter_for(Channel.TELEGRAM)
    return _handle(request, [adapter] if adapter else [], _JSON, _ok)


@csrf_exempt
def bluebubbles_webhook(request: HttpRequest) -> HttpResponse:
    adapter = adapter_for(Channel.IMESSAGE)
    return _handle(request, [adapter] if adapter else [], _JSON, _ok)
