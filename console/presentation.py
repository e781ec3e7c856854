"""How a message of the thread is described to its owner."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ObjectDoesNotExist

from assistant.approval.requests import APPROVAL_CONTEXT
from assistant.models import Action
from conversations.models import DeliveryStatus, Message, Role, Source


def source_label(message: Message) -> str:
    """Where the message came from: typed in the app, API via key "name", the legacy webhook, or the assistant."""
    key_name = message.api_key.name if message.api_key_id and message.api_key else None
    context = message.context if isinstance(message.context, dict) else {}
    if message.source == Source.API:
        return f"API via key “{key_name}”" if key_name else "API (key since removed)"
    if message.source == Source.LEGACY_WEBHOOK:
        return f"Legacy webhook via key “{key_name}”" if key_name else "Legacy webhook"
    if message.source == Source.WEBHOOK_TRIGGER:
        condition = message.trigger.condition if message.trigger_id and message.trigger else None
        return f"Webhook “{condition[:60]}”" if condition else "Webhook"
    if message.source == Source.TOOL_FOLLOW_UP and context.get("tool"):
        return f"Follow-up from {context['tool']}"
    # Written on a linked channel (channels/inbound.py): who sent it.
    sender = context.get("from") if message.source in CHANNEL_SOURCES else None
    return f"{message.get_source_display()} from {sender}" if sender else str(message.get_source_display())


CHANNEL_SOURCES = (Source.SMS, Source.WHATSAPP, Source.IMESSAGE, Source.TELEGRAM)


@dataclass(frozen=True, slots=True)
class DeliveryState:
    """Where a message's hand-off to the assistant stands, as its bubble says it."""

    kind: str  # queued, retrying, processing, delivered, failed
    attempts: int
    retry_at: datetime | None
    settled: bool  # delivered or failed: the page stops asking about it


def delivery_state(message: Message) -> DeliveryState | None:
    """None for a message that is not handed to the assistant (a reply, a reminder)."""
    delivery = getattr(message, "delivery", None)  # the reverse one-to-one raises an AttributeError when absent
    if delivery is None:  # none, or pruned after DELIVERY_RETENTION_DAYS: its final status stays on the message
        return DeliveryState(kind=message.outcome, attempts=0, retry_at=None, settled=True) if message.outcome else None
    kind = str(delivery.status)
    if delivery.status == DeliveryStatus.QUEUED and delivery.next_attempt_at is not None and delivery.attempts:
        kind = "retrying"
    settled = delivery.status in (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)
    return DeliveryState(kind=kind, attempts=delivery.attempts, retry_at=delivery.next_attempt_at, settled=settled)


def actions_of(message: Message) -> list[Any]:
    """What the assistant did (its tool calls) while writing this reply, oldest first; [] for other messages."""
    try:
        delivery = message.answered_delivery
    except ObjectDoesNotExist:
        return []
    return list(delivery.actions.all())


def approval_of(message: Message) -> Action | None:
    """For the assistant's message that asks the person's approval (assistant/approval/requests.py): the action."""
    if message.role != Role.ASSISTANT or not isinstance(message.context, dict):
        return None
    action_id = message.context.get(APPROVAL_CONTEXT)
    if not isinstance(action_id, int):
        return None
    return Action.objects.filter(pk=action_id, approval_message_id=message.pk).first()


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


# A long message is shown shortened in the thread (and in each poll's answer), with a link to the whole of it: the
# thread of forty 240 KB messages was a 62 MB page.
SHORT_TEXT_CHARS = 1500
SHORT_JSON_CHARS = 1500
SUMMARY_CHARS = 160


@dataclass(frozen=True, slots=True)
class Excerpt:
    text: str
    shortened: bool
    size: str  # of the whole, for the link: "240 KB", "3,200 characters"


def _size_of(text: str) -> str:
    length = len(text)
    return f"{length:,} characters" if length < 10_000 else f"{round(len(text.encode()) / 1024):,} KB"


def excerpt(text: str, limit: int = SHORT_TEXT_CHARS) -> Excerpt:
    """The start of a long text, cut at a space near the limit where there is one."""
    if len(text) <= limit:
        return Excerpt(text, False, _size_of(text))
    cut = text[:limit]
    space = cut.rfind(" ", limit - 200)
    return Excerpt((cut[:space] if space > 0 else cut).rstrip() + " …", True, _size_of(text))


def context_excerpt(context: Any) -> Excerpt:
    """The context JSON, indented, shortened like the text."""
    whole = pretty_json(context)
    if len(whole) <= SHORT_JSON_CHARS:
        return Excerpt(whole, False, _size_of(whole))
    return Excerpt(whole[:SHORT_JSON_CHARS].rstrip() + "\n…", True, _size_of(whole))


def json_summary(context: Any) -> str:
    """One line standing for a message that has no text (a body without a `message` member): its JSON, compact."""
    if context is None:
        return ""
    compact = json.dumps(context, ensure_ascii=False, separators=(", ", ": "))
    return compact if len(compact) <= SUMMARY_CHARS else compact[: SUMMARY_CHARS - 1].rstrip() + "…"
