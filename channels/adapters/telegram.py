"""Telegram through the Bot API: ``sendMessage`` to a chat id; updates arrive at our webhook, which Telegram calls
with ``X-Telegram-Bot-Api-Secret-Token`` equal to the ``secret_token`` given to ``setWebhook`` (``manage.py
settelegramwebhook``). Telegram reports no delivery statuses.

The bot token is part of every API URL's path, so no such URL reaches an error text or a log
(channels/adapters/http.py). Files come as ``file_id``s: their download URL also holds the token, so only the id is
kept (``getFile`` resolves it) and nothing is fetched inside Telegram's request. Only private chats are read.

An approval request is sent with inline Approve / Deny buttons; a tap comes back as a ``callback_query`` update
(channels/approvals.py answers it with ``answerCallbackQuery`` and edits the request's message to say the outcome)."""

from datetime import UTC, datetime
from typing import Any

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
    approval_buttons,
    button_data,
    check_secret,
    pressed,
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


class TelegramAdapter(NoLookup, NoTemplates):
    """The Bot API has no way to list what a bot sent (NoLookup), and no window that a template would open."""

    channel = Channel.TELEGRAM
    max_text_length = MAX_TEXT_LENGTH

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        """An approval request goes with Approve / Deny buttons under it instead of its reply line."""
        body: dict[str, Any] = {"chat_id": _chat_id(address), "text": text}
        request = approval_buttons(text)
        if request is not None:
            body["text"], code = request
            body["reply_markup"] = {"inline_keyboard": [_buttons(code)]}
        answer = http.call("Telegram", _method_url("sendMessage"), body)
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict) or "message_id" not in result:
            raise SendError("Telegram answered without a message id.", retryable=False)
        # message_id is unique within a chat only.
        return Sent(provider_message_id=f"{address}:{result['message_id']}")

    def answer_press(self, query: str, text: str) -> None:
        """Answer a button's callback query (``answerCallbackQuery``): the app stops its spinner and shows ``text``
        for a moment. Raises SendError."""
        http.call("Telegram", _method_url("answerCallbackQuery"), {"callback_query_id": query, "text": text[:200]})

    def show_outcome(self, message: str, text: str) -> None:
        """Rewrite the request's message ("<chat id>:<message id>") to ``text``, its buttons gone
        (``editMessageText`` without a keyboard). Raises SendError."""
        chat, _, message_id = message.rpartition(":")
        if not (chat and message_id.isascii() and message_id.isdigit()):
            raise SendError("Not a Telegram message reference.", retryable=False)
        body = {"chat_id": _chat_id(chat), "message_id": int(message_id), "text": text[:MAX_TEXT_LENGTH]}
        http.call("Telegram", _method_url("editMessageText"), body)

    def set_webhook(self, url: str) -> str:
        """Point the bot's updates at ``url`` with our secret token; Telegram's description of what it did. Button
        taps (``callback_query``) are asked for beside messages: they answer approval requests."""
        body = {
            "url": url,
            "secret_token": settings.TELEGRAM_WEBHOOK_SECRET,
            "allowed_updates": ["message", "callback_query"],
        }
        answer = http.call("Telegram", _method_url("setWebhook"), body)
        return str(answer.get("description", "")) if isinstance(answer, dict) else ""

    def verify(self, request: HttpRequest) -> None:
        given = request.headers.get(SECRET_HEADER, "")
        check_secret(given, settings.TELEGRAM_WEBHOOK_SECRET, f"{SECRET_HEADER} header")

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        return parse_update(_update(request))

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        return []


def parse_update(update: dict[str, Any]) -> list[Inbound]:
    """What one update (an object with an int ``update_id``) brings: a message, a button's tap, or nothing. The
    console's local phone (console/views/local_phone.py) hands its updates here too, so they are read as Telegram's."""
    if "callback_query" in update:
        press = _press(update)
        return [press] if press is not None else []
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


def _chat_id(address: str) -> int | str:
    return int(address) if address.isascii() and address.lstrip("-").isdigit() else address


def _buttons(code: str) -> list[dict[str, str]]:
    return [
        {"text": "✅ Approve", "callback_data": button_data(True, code)},
        {"text": "✖️ Deny", "callback_data": button_data(False, code)},
    ]


def _press(update: dict[str, Any]) -> Inbound | None:
    """A tap on one of our buttons, in a private chat by the chat's own person: the chat id is the address. Any other
    callback query (another bot's data, a group, an inline message without a chat) is not ours to read."""
    query = mapping(update.get("callback_query"))
    message = mapping(query.get("message"))
    chat = mapping(message.get("chat"))
    sender = mapping(query.get("from"))
    chat_id, message_id = chat.get("id"), message.get("message_id")
    if not (isinstance(chat_id, int) and isinstance(message_id, int) and isinstance(query.get("id"), str)):
        return None
    if chat.get("type") != "private" or sender.get("id") != chat_id:
        return None
    press = pressed(text(query.get("data")), f"{chat_id}:{message_id}", query["id"])
    if press is None:
        return None
    return Inbound(str(update["update_id"]), str(chat_id), "", [], None, press=press)


def _update(request: HttpRequest) -> dict[str, Any]:
    update = json_body(request)
    if not isinstance(update.get("update_id"), int):
        raise BadRequest("The body is not a Telegram update (an object with an update_id).")
    return update


def _moment(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) and 0 < value < 10**11 else None
