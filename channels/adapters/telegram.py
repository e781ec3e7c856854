"""Telegram through the Bot API: ``sendMessage`` to a chat id; updates arrive at our webhook, which Telegram calls
with ``X-Telegram-Bot-Api-Secret-Token`` equal to the ``secret_token`` given to ``setWebhook`` (``manage.py
settelegramwebhook``). Telegram reports no delivery statuses.

The bot token is part of every API URL's path, so no such URL reaches an error text or a log
(channels/adapters/http.py). Files come as ``file_id``s: their download URL also holds the token, so only the id is
kept (``getFile`` resolves it) and nothing is fetched inside Telegram's request. Only private chats are read."""

import hmac
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from channels.adapters import http
from channels.adapters.base import (
    BadRequest,
    Channel,
    Inbound,
    SendError,
    Sent,
    StatusUpdate,
    VerificationFailed,
    no_template,
)
from channels.adapters.payloads import items, json_body, mapping, text

WEBHOOK_PATH = "/channels/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_TEXT_LENGTH = 4096  # sendMessage's text, after entity parsing
_FILES = ("document", "audio", "video", "voice", "video_note", "sticker", "animation")


def is_configured() -> bool:
    return all((settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_BOT_USERNAME, settings.TELEGRAM_WEBHOOK_SECRET))


def _method_url(method: str) -> str:
    return f"{settings.TELEGRAM_API_BASE_URL}/bot{settings.TELEGRAM_BOT_TOKEN}/{method}"


def deep_link(token: str) -> str:
    """The link that opens the bot and sends it ``/start <token>``."""
    return f"https://t.me/{settings.TELEGRAM_BOT_USERNAME}?start={token}"


class TelegramAdapter:
    channel = Channel.TELEGRAM
    max_text_length = MAX_TEXT_LENGTH

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        chat_id: int | str = int(address) if address.isascii() and address.lstrip("-").isdigit() else address
        answer = http.call("Telegram", _method_url("sendMessage"), {"chat_id": chat_id, "text": text})
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict) or "message_id" not in result:
            raise SendError("Telegram answered without a message id.", retryable=False)
        # message_id is unique within a chat only.
        return Sent(provider_message_id=f"{address}:{result['message_id']}")

    def can_send_template(self) -> bool:
        return False  # no window that a template would open

    def send_template(self, address: str, text: str, *, reference: str) -> Sent:
        raise no_template(self.channel)

    def set_webhook(self, url: str) -> str:
        """Point the bot's updates at ``url`` with our secret token; Telegram's description of what it did."""
        body = {"url": url, "secret_token": settings.TELEGRAM_WEBHOOK_SECRET, "allowed_updates": ["message"]}
        answer = http.call("Telegram", _method_url("setWebhook"), body)
        return str(answer.get("description", "")) if isinstance(answer, dict) else ""

    def verify(self, request: HttpRequest) -> None:
        given = request.headers.get(SECRET_HEADER, "")
        if not given:
            raise VerificationFailed(f"no {SECRET_HEADER} header")
        if not hmac.compare_digest(given.encode(), settings.TELEGRAM_WEBHOOK_SECRET.encode()):
            raise VerificationFailed(f"{SECRET_HEADER} does not match")

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        update = _update(request)
        message = update.get("message")
        if not isinstance(message, dict):
            return []  # edits, channel posts, member changes: not a new message from the person
        chat = mapping(message.get("chat"))
        if chat.get("type") != "private" or not isinstance(chat.get("id"), int):
            return []
        body = text(message.get("text")) or text(message.get("caption"))
        media = []
        photos = [photo for photo in map(mapping, items(message.get("photo"))) if photo.get("file_id")]
        if photos:  # the same picture in several sizes: the largest
            media.append({"id": str(photos[-1]["file_id"]), "contentType": "image/jpeg", "kind": "photo"})
        for kind in _FILES:
            item = mapping(message.get(kind))
            if item.get("file_id"):
                media.append({"id": str(item["file_id"]), "contentType": str(item.get("mime_type", "")), "kind": kind})
        sender = mapping(message.get("from"))
        extra = {"profileName": str(sender["first_name"])} if sender.get("first_name") else {}
        return [
            Inbound(
                str(update["update_id"]),
                str(chat["id"]),
                body,
                media,
                _moment(message.get("date")),
                extra,
            )
        ]

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        return []


def _update(request: HttpRequest) -> dict[str, Any]:
    update = json_body(request)
    if not isinstance(update.get("update_id"), int):
        raise BadRequest("The body is not a Telegram update (an object with an update_id).")
    return update


def _moment(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) and 0 < value < 10**11 else None
