"""The local phone (DEBUG only): the texts sent to the signed-in person's linked Telegram chat, read from the outbox,
with an approval request's buttons; pressing one or typing a reply hands a Telegram update to the same reading
(channels/adapters/telegram.py ``parse_update``) and the same inbound path (channels/inbound.py) as the webhook, so
the answer is decided exactly as a real phone's is (docs/howto/approve-from-phone.md#try-it-locally)."""

import time
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from channels import inbound
from channels.adapters import telegram
from channels.adapters.base import Channel, approval_buttons, button_data
from channels.models import OutboundMessage
from console.signed_in import AuthenticatedRequest
from ops.request_id import request_id_of
from ops.visible import visible

SHOWN = 50


def _chat_of(request: AuthenticatedRequest) -> str:
    if not settings.DEBUG:
        raise Http404
    linked = request.user.linked_addresses.filter(channel=Channel.TELEGRAM).order_by("-linked_at").first()
    return linked.address if linked else ""


def _text(row: OutboundMessage) -> dict[str, Any]:
    request = approval_buttons(row.text)
    shown: dict[str, Any] = {"row": row, "text": visible(request[0] if request else row.text), "buttons": []}
    _, _, message_id = row.provider_message_id.rpartition(":")
    if request is not None and message_id.isdigit():
        code = request[1]
        shown["buttons"] = [("✅ Approve", button_data(True, code)), ("✖️ Deny", button_data(False, code))]
    return shown


def _update(chat: str, post: Any) -> dict[str, Any]:
    """The update Telegram would send for this tap or reply; its update_id a moment, unique as Telegram's are."""
    update_id, who = time.time_ns() // 1000, {"id": int(chat), "type": "private"}
    if post.get("data"):
        tail = str(post.get("message", "")).rpartition(":")[2]
        message_id = int(tail) if tail.isascii() and tail.isdigit() else 0
        query = {"id": f"local-{update_id}", "from": {"id": int(chat)}, "data": post["data"]}
        query["message"] = {"message_id": message_id, "chat": who}
        return {"update_id": update_id, "callback_query": query}
    message = {"message_id": update_id, "chat": who, "from": {"id": int(chat)}, "date": int(time.time())}
    return {"update_id": update_id, "message": message | {"text": str(post.get("text", ""))[:4096]}}


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def local_phone(request: AuthenticatedRequest) -> HttpResponse:
    chat = _chat_of(request)
    if request.method == "POST" and chat.lstrip("-").isdigit():
        for message in telegram.parse_update(_update(chat, request.POST)):
            received = inbound.receive(Channel.TELEGRAM, message, request_id_of(request))
            # Telegram shows a tap's answer for a moment in the app; here the outcome is said on the page instead.
            messages.info(request, f"The server read it as: {received.outcome}.")
        return redirect("channels:local_phone")
    rows = OutboundMessage.objects.filter(person=request.user, channel=Channel.TELEGRAM, address=chat)
    texts = [_text(row) for row in rows.order_by("-created_at", "-id")[:SHOWN]] if chat else []
    return render(request, "local_phone/phone.html", {"chat": chat, "texts": texts})
