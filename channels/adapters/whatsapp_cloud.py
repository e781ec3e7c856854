"""WhatsApp through Meta's Cloud API (Graph API): send with ``POST /{phone-number-id}/messages``; Meta checks the
callback URL once with a GET (``hub.mode=subscribe``, ``hub.verify_token``, answered with ``hub.challenge``); every
event is a POST signed with ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body, keyed with the app
secret>``. One event may carry several messages and statuses, for several of the business's numbers: only this
deployment's number (WHATSAPP_CLOUD_PHONE_NUMBER_ID) counts.

Media come as ids; their download URL needs the access token and a second call, so the message's context keeps the
Graph URL that resolves the id, and nothing is fetched while Meta waits. Sends carry no idempotency key (Meta offers
none): ``reference`` is unused.

Outside WhatsApp's 24-hour window only a template Meta approved may go out: with WHATSAPP_CLOUD_TEMPLATE_NAME set,
a ``type: "template"`` message of that name and WHATSAPP_CLOUD_TEMPLATE_LANGUAGE, the text as its body's parameter
(``send_template``).

An approval request is sent as an interactive message with two reply buttons (Approve / Deny); a tap comes back as
a message of type ``interactive`` whose ``button_reply`` carries the button's id and whose ``context`` names the
request's message (channels/approvals.py)."""

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from channels.adapters import http
from channels.adapters.base import (
    Channel,
    Inbound,
    NoLookup,
    SendError,
    Sent,
    StatusUpdate,
    approval_buttons,
    button_data,
    check_secret,
    no_template,
    pressed,
    template_variable,
)
from channels.adapters.payloads import items, json_body, mapping

WEBHOOK_PATH = "/channels/whatsapp/webhook"
MAX_TEXT_LENGTH = 4096  # a text message's body
INTERACTIVE_BODY_LENGTH = 1024  # an interactive message's body
_MEDIA_TYPES = ("image", "audio", "video", "document", "sticker")
_STATUSES = {"sent": "sent", "delivered": "delivered", "read": "read", "failed": "failed"}


def is_configured() -> bool:
    return all(
        (
            settings.WHATSAPP_CLOUD_ACCESS_TOKEN,
            settings.WHATSAPP_CLOUD_PHONE_NUMBER_ID,
            settings.WHATSAPP_CLOUD_APP_SECRET,
            settings.WHATSAPP_CLOUD_VERIFY_TOKEN,
        )
    )


def signature_of(body: bytes, app_secret: str) -> str:
    """The X-Hub-Signature-256 value Meta sends for ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def verification_answer(mode: str, token: str, challenge: str) -> str | None:
    """The GET handshake: the challenge to echo when Meta's subscribe request carries our verify token, else None."""
    expected = settings.WHATSAPP_CLOUD_VERIFY_TOKEN.encode()
    if mode != "subscribe" or not challenge or not hmac.compare_digest(token.encode(), expected):
        return None
    return challenge


class WhatsAppCloudAdapter(NoLookup):
    """Meta's Cloud API has no way to look a sent message up, and its status webhooks name only the message id a
    timed-out send never got (NoLookup)."""

    channel = Channel.WHATSAPP
    max_text_length = MAX_TEXT_LENGTH

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        """An approval request goes as an interactive message with Approve / Deny reply buttons instead of its reply
        line, when its text fits an interactive body; else as text, the reply line kept."""
        request = approval_buttons(text)
        if request is not None and len(request[0]) <= INTERACTIVE_BODY_LENGTH:
            body, code = request
            buttons = [
                {"type": "reply", "reply": {"id": button_data(approve, code), "title": title}}
                for approve, title in ((True, "Approve"), (False, "Deny"))
            ]
            return self._send(
                address, "interactive", {"type": "button", "body": {"text": body}, "action": {"buttons": buttons}}
            )
        return self._send(address, "text", {"preview_url": False, "body": text})

    def can_send_template(self) -> bool:
        return bool(settings.WHATSAPP_CLOUD_TEMPLATE_NAME)

    def send_template(self, address: str, text: str, *, reference: str) -> Sent:
        """The approved template (WHATSAPP_CLOUD_TEMPLATE_NAME in WHATSAPP_CLOUD_TEMPLATE_LANGUAGE), the text as the
        one parameter of its body. Meta refuses a name or language it has not approved for this business (a 400,
        not retried: the operator must fix the setting)."""
        if not self.can_send_template():
            raise no_template(self.channel)
        template = {
            "name": settings.WHATSAPP_CLOUD_TEMPLATE_NAME,
            "language": {"code": settings.WHATSAPP_CLOUD_TEMPLATE_LANGUAGE},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": template_variable(text)}]}],
        }
        return self._send(address, "template", template)

    def _send(self, address: str, kind: str, content: dict[str, Any]) -> Sent:
        """``POST /{phone-number-id}/messages`` with one message of ``kind`` ("text", "template") to a number."""
        url = f"{settings.WHATSAPP_CLOUD_API_BASE_URL}/{settings.WHATSAPP_CLOUD_PHONE_NUMBER_ID}/messages"
        body = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": address.removeprefix("+"),
            "type": kind,
            kind: content,
        }
        headers = {"Authorization": f"Bearer {settings.WHATSAPP_CLOUD_ACCESS_TOKEN}"}
        answer = http.call("WhatsApp Cloud API", url, body, headers)
        try:
            return Sent(provider_message_id=str(answer["messages"][0]["id"]))
        except (KeyError, IndexError, TypeError):
            raise SendError("WhatsApp Cloud API answered without a message id.", retryable=False) from None

    def verify(self, request: HttpRequest) -> None:
        expected = signature_of(request.body, settings.WHATSAPP_CLOUD_APP_SECRET)
        check_secret(request.headers.get("X-Hub-Signature-256", ""), expected, "X-Hub-Signature-256 header")

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        found = []
        for value in _values(request):
            for message in items(value.get("messages")):
                inbound = _inbound(message, _names(value))
                if inbound is not None:
                    found.append(inbound)
        return found

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        found = []
        for value in _values(request):
            for status in items(value.get("statuses")):
                if not isinstance(status, dict) or status.get("status") not in _STATUSES or not status.get("id"):
                    continue
                errors = [e for e in items(status.get("errors")) if isinstance(e, dict)]
                error = " ".join(str(errors[0].get(k, "")) for k in ("code", "title")).strip() if errors else ""
                found.append(StatusUpdate(str(status["id"]), _STATUSES[status["status"]], error[:300]))
        return found


def _values(request: HttpRequest) -> list[dict[str, Any]]:
    """Each change's ``value`` for this deployment's number, from an event of the WhatsApp Business Account."""
    payload = json_body(request)
    if payload.get("object") != "whatsapp_business_account":
        return []
    values = []
    for entry in items(payload.get("entry")):
        for change in items(entry.get("changes") if isinstance(entry, dict) else None):
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                continue
            if (
                str(mapping(value.get("metadata")).get("phone_number_id", ""))
                == settings.WHATSAPP_CLOUD_PHONE_NUMBER_ID
            ):
                values.append(value)
    return values


def _names(value: dict[str, Any]) -> dict[str, str]:
    """wa_id → the profile name the person set, from the change's contacts."""
    names = {}
    for contact in items(value.get("contacts")):
        if isinstance(contact, dict) and isinstance(contact.get("profile"), dict):
            names[str(contact.get("wa_id", ""))] = str(contact["profile"].get("name", ""))
    return names


def _inbound(message: Any, names: dict[str, str]) -> Inbound | None:
    if not isinstance(message, dict) or not message.get("id") or not _ascii_digits(str(message.get("from", ""))):
        return None
    kind = message.get("type")
    part = mapping(message.get(kind)) if isinstance(kind, str) else {}
    body, media = "", []
    if kind == "text":
        body = str(part.get("body", ""))
    elif kind in _MEDIA_TYPES and part.get("id"):
        body = str(part.get("caption", ""))
        media.append(
            {
                "id": str(part["id"]),
                "contentType": str(part.get("mime_type", "")),
                # Resolves to the download URL with the access token; never fetched inside Meta's request.
                "url": f"{settings.WHATSAPP_CLOUD_API_BASE_URL}/{part['id']}",
            }
        )
    elif kind == "button":
        body = str(part.get("text", ""))
    elif kind == "interactive":
        reply = mapping(part.get("button_reply") or part.get("list_reply"))
        press = pressed(str(reply.get("id", "")), str(mapping(message.get("context")).get("id", "")))
        if press is not None:  # Approve / Deny on an approval request (channels/approvals.py)
            return Inbound(str(message["id"]), "+" + str(message["from"]), "", [], None, press=press)
        body = str(reply.get("title", ""))
    else:
        return None  # reactions, locations, contacts, system messages: not a message for the thread
    sender = str(message["from"])
    extra = {"profileName": names[sender]} if names.get(sender) else {}
    return Inbound(str(message["id"]), "+" + sender, body, media, _timestamp(message.get("timestamp")), extra)


def _timestamp(value: Any) -> datetime | None:
    text = str(value or "")
    return datetime.fromtimestamp(int(text), UTC) if text.isascii() and text.isdigit() and len(text) <= 12 else None


def _ascii_digits(text: str) -> bool:
    """0-9 only: str.isdigit() alone also takes digits such as "²" that int() refuses."""
    return text.isascii() and text.isdigit()
