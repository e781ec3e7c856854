"""iMessage through a BlueBubbles server (a Mac running BlueBubbles, reachable at BLUEBUBBLES_URL).

Sending: ``POST /api/v1/message/text?password=...`` with ``{"chatGuid": "iMessage;-;+E164", "tempGuid", "message",
"method"}``; BlueBubbles answers with the message's ``guid``. The password rides in the query (BlueBubbles' own
design), so no URL of this server ever reaches an error text or a log (channels/adapters/http.py).

Receiving: BlueBubbles cannot sign its webhooks. Its webhook URL, set in BlueBubbles' settings, carries our secret:
``PUBLIC_BASE_URL/channels/bluebubbles/webhook?secret=BLUEBUBBLES_WEBHOOK_SECRET``; it is compared in constant time
and redacted from every log line (ops/redaction.py). Events: ``new-message`` (the person's messages, and our own
sent ones, ``isFromMe``, which are skipped), ``updated-message`` (delivered / read / an error, for our own)."""

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest

from channels.adapters import http
from channels.adapters.base import (
    BadRequest,
    Channel,
    Inbound,
    NoLookup,
    NoTemplates,
    SendError,
    Sent,
    StatusUpdate,
    check_secret,
)
from channels.adapters.payloads import items, json_body, mapping, text

WEBHOOK_PATH = "/channels/bluebubbles/webhook"
SECRET_PARAMETER = "secret"
# iMessage has no documented limit; long texts arrive but are unwieldy: split like WhatsApp.
MAX_TEXT_LENGTH = 4096


def is_configured() -> bool:
    return all((settings.BLUEBUBBLES_URL, settings.BLUEBUBBLES_PASSWORD, settings.BLUEBUBBLES_WEBHOOK_SECRET))


def webhook_url() -> str:
    """What to paste into BlueBubbles' webhook settings (it holds the secret: show it only to the operator)."""
    return (
        f"{settings.PUBLIC_BASE_URL}{WEBHOOK_PATH}?{urlencode({SECRET_PARAMETER: settings.BLUEBUBBLES_WEBHOOK_SECRET})}"
    )


class BlueBubblesAdapter(NoLookup, NoTemplates):
    """BlueBubbles' API has no lookup by recipient and time that we rely on (NoLookup)."""

    channel = Channel.IMESSAGE
    max_text_length = MAX_TEXT_LENGTH

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        url = f"{settings.BLUEBUBBLES_URL}/api/v1/message/text?{urlencode({'password': settings.BLUEBUBBLES_PASSWORD})}"
        # chatGuid: the one-to-one iMessage chat with the address (a number in E.164 or an Apple ID's e-mail).
        # tempGuid: BlueBubbles matches the sent message to it; our stable reference, so a resend is recognisable.
        body = {"chatGuid": f"iMessage;-;{address}", "tempGuid": reference, "message": text, "method": "apple-script"}
        answer = http.call("BlueBubbles", url, body)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict) or not data.get("guid"):
            raise SendError("BlueBubbles answered without a message guid.", retryable=False)
        return Sent(provider_message_id=str(data["guid"]))

    def verify(self, request: HttpRequest) -> None:
        given = request.GET.get(SECRET_PARAMETER, "")
        check_secret(given, settings.BLUEBUBBLES_WEBHOOK_SECRET, "secret in the webhook URL")

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        kind, data = _event(request)
        if kind != "new-message" or data.get("isFromMe") or not data.get("guid"):
            return []
        if not _one_to_one(data):
            return []  # group chats are not a person's thread
        address = text(mapping(data.get("handle")).get("address")).strip()
        if not address:
            return []
        media = []
        for attachment in items(data.get("attachments")):
            if isinstance(attachment, dict) and attachment.get("guid"):
                media.append(
                    {
                        "id": str(attachment["guid"]),
                        "contentType": str(attachment.get("mimeType") or ""),
                        "name": str(attachment.get("transferName") or ""),
                        # Downloading needs the server's password, added by whoever fetches it; not stored here.
                        "url": f"{settings.BLUEBUBBLES_URL}/api/v1/attachment/{attachment['guid']}/download",
                    }
                )
        # U+FFFC stands where an attachment sat in the text.
        body = text(data.get("text")).replace("\ufffc", "").strip()
        return [Inbound(str(data["guid"]), address, body, media, _moment(data))]

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        kind, data = _event(request)
        if kind != "updated-message" or not data.get("isFromMe") or not data.get("guid"):
            return []
        guid = str(data["guid"])
        error = data.get("error")
        if isinstance(error, int) and error != 0:
            return [StatusUpdate(guid, "failed", f"BlueBubbles error {error}")]
        if data.get("dateRead"):
            return [StatusUpdate(guid, "read")]
        if data.get("dateDelivered"):
            return [StatusUpdate(guid, "delivered")]
        return [StatusUpdate(guid, "sent")]


def _event(request: HttpRequest) -> tuple[str, dict[str, Any]]:
    payload = json_body(request)
    if not isinstance(payload.get("type"), str):
        raise BadRequest("The body is not a BlueBubbles event (an object with a type).")
    return payload["type"], mapping(payload.get("data"))


def _one_to_one(data: dict[str, Any]) -> bool:
    chats = [mapping(chat) for chat in items(data.get("chats"))]
    return not chats or all(";-;" in str(chat.get("guid", "")) for chat in chats)


def _moment(data: dict[str, Any]) -> datetime | None:
    value = data.get("dateCreated")
    return datetime.fromtimestamp(value / 1000, UTC) if isinstance(value, int) and 0 < value < 10**14 else None
