"""How a message of the thread is described to its owner."""

import json
from typing import Any

from django.core.exceptions import ObjectDoesNotExist

from conversations.models import Message, Source


def source_label(message: Message) -> str:
    """Where the message came from: typed in the app, API via key "name", the legacy webhook, or the assistant."""
    key_name = message.api_key.name if message.api_key_id and message.api_key else None
    if message.source == Source.API:
        return f"API via key “{key_name}”" if key_name else "API (key since removed)"
    if message.source == Source.LEGACY_WEBHOOK:
        return f"Legacy webhook via key “{key_name}”" if key_name else "Legacy webhook"
    if message.source == Source.WEBHOOK_TRIGGER:
        condition = message.trigger.condition if message.trigger_id and message.trigger else None
        return f"Webhook “{condition[:60]}”" if condition else "Webhook"
    if message.source == Source.TOOL_FOLLOW_UP and isinstance(message.context, dict) and message.context.get("tool"):
        return f"Follow-up from {message.context['tool']}"
    return str(message.get_source_display())


def actions_of(message: Message) -> list[Any]:
    """What the assistant did (its tool calls) while writing this reply, oldest first; [] for other messages."""
    try:
        delivery = message.answered_delivery
    except ObjectDoesNotExist:
        return []
    return list(delivery.actions.all())


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
