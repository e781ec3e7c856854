from typing import Any

from django import template

from channels.models import OutboundMessage
from channels.outbound.summary import PhoneStatus, summarize
from console import presentation
from conversations.models import Message

register = template.Library()


@register.filter
def source_label(message: Message) -> str:
    return presentation.source_label(message)


@register.filter
def pretty_json(value: Any) -> str:
    return presentation.pretty_json(value)


@register.filter
def delivery_state(message: Message) -> presentation.DeliveryState | None:
    return presentation.delivery_state(message)


@register.filter
def actions_of(message: Message) -> list[Any]:
    return presentation.actions_of(message)


@register.filter
def approval_of(message: Message) -> Any:
    """The action an assistant's message asks approval for, if it is one (assistant/approval/requests.py)."""
    return presentation.approval_of(message)


@register.filter
def excerpt(text: str) -> presentation.Excerpt:
    return presentation.excerpt(text or "")


@register.filter
def context_excerpt(context: Any) -> presentation.Excerpt:
    return presentation.context_excerpt(context)


@register.filter
def json_summary(context: Any) -> str:
    return presentation.json_summary(context)


@register.filter
def phone_status(message: Message) -> PhoneStatus | None:
    """What became of the message on the person's phone (its outbox rows; the thread prefetches them)."""
    return summarize(list(message.outbound.all()))


@register.filter
def phone_row(row: OutboundMessage) -> PhoneStatus | None:
    """One part's own status (the message page lists each part)."""
    return summarize([row])
