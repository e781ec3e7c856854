from django import template

from channels.models import OutboundMessage
from channels.outbound.summary import PhoneStatus, summarize
from console import presentation
from conversations.models import Message

register = template.Library()


# The thread's filters are console/presentation.py's functions, under their own names.
register.filter("source_label", presentation.source_label)
register.filter("pretty_json", presentation.pretty_json)
register.filter("delivery_state", presentation.delivery_state)
register.filter("actions_of", presentation.actions_of)
register.filter("approval_of", presentation.approval_of)
register.filter("context_excerpt", presentation.context_excerpt)
register.filter("json_summary", presentation.json_summary)


@register.filter
def excerpt(text: str | None) -> presentation.Excerpt:
    return presentation.excerpt(text or "")


@register.filter
def phone_status(message: Message) -> PhoneStatus | None:
    """What became of the message on the person's phone (its outbox rows; the thread prefetches them)."""
    return summarize(list(message.outbound.all()))


@register.filter
def phone_row(row: OutboundMessage) -> PhoneStatus | None:
    """One part's own status (the message page lists each part)."""
    return summarize([row])
