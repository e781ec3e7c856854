"""Who asked for an action that waits for the person's approval, and whether they still may: a request dies with its
asker (assistant/approval/requests.py, ``withdraw_pending``). The asker of a call is the message of its delivery (its
key or trigger, or the person), and for a call made while answering a tool's follow-up or a person's approval, the call
that led to it too, all the way back: the connection of a tool whose follow-up led to a call is one of its askers."""

from collections.abc import Iterator
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone

from assistant.models import Action, ActionState, ToolKind
from connections.models import Connection
from conversations.models import Message, Source
from keys.models import ApiKey
from triggers.models import WebhookTrigger

MAX_DEPTH = 20  # follow-ups of follow-ups: far more than any real chain, and a bound on a loop


def chain(action: Action) -> Iterator[Action]:
    """The action, then each call that led to it (through a follow-up's or an approval's message), nearest first."""
    seen: set[int] = set()
    current: Action | None = action
    while current is not None and current.pk not in seen and len(seen) < MAX_DEPTH:
        seen.add(current.pk)
        yield current
        current = _led_by(current.delivery.message)


def _led_by(message: Message) -> Action | None:
    context = message.context if isinstance(message.context, dict) else {}
    if message.source == Source.TOOL_FOLLOW_UP:
        parent = context.get("action")
    elif message.source == Source.APPROVAL:
        parent = context.get("approvedAction")
    else:
        return None
    if not isinstance(parent, int):
        return None
    return with_origin().filter(pk=parent).first()


def root_message_id(message: Message) -> int:
    """The message a cascade began with: ``message`` itself, or, for a follow-up's or an approval's, the message of
    the first call that led to it."""
    parent = _led_by(message)
    if parent is None:
        return message.pk
    *_, first = chain(parent)
    return first.delivery.message_id


def with_origin() -> QuerySet[Action]:
    return Action.objects.select_related(
        "connection", "delivery__message__api_key", "delivery__message__trigger", "delivery__conversation__user"
    )


def gone(action: Action, now: datetime | None = None) -> str | None:
    """Why the request can no longer be answered, in the person's words, or None while its askers all hold. (A
    rolled key's requests die at the roll, keys/services.py; those its old secret makes during the overlap live
    until the overlap ends, when the old key expires.)"""
    now = now or timezone.now()
    conversation = action.delivery.conversation
    if conversation is None or not conversation.user.is_active:
        return "your account was deactivated"
    for step in chain(action):
        why = _message_gone(step.delivery.message, now) or _connection_gone(step)
        if why:
            return why
    return None


def _message_gone(message: Message, now: datetime) -> str | None:
    key, trigger = message.api_key, message.trigger
    if key is not None:
        if key.is_revoked:
            return f"the API key “{key.name}” that asked for it was revoked"
        if key.is_expired(now):
            return f"the API key “{key.name}” that asked for it expired"
    elif message.source in (Source.API, Source.LEGACY_WEBHOOK):
        return "the API key that asked for it no longer exists"
    if trigger is not None:
        if trigger.revoked_at is not None:
            return "the webhook trigger that asked for it was removed"
    elif message.source == Source.WEBHOOK_TRIGGER:
        return "the webhook trigger that asked for it no longer exists"
    return None


def _connection_gone(action: Action) -> str | None:
    if action.kind != ToolKind.MCP:
        return None
    if action.connection is None:
        return f"the connection “{action.connection_name}” was removed"
    if not action.connection.active:
        return f"the connection “{action.connection_name}” is switched off"
    return None


def pending(
    *,
    key: ApiKey | None = None,
    trigger: WebhookTrigger | None = None,
    connection: Connection | None = None,
    user: User | None = None,
) -> list[Action]:
    """The requests still waiting that one of these asked for."""
    waiting = with_origin().filter(state=ActionState.AWAITING_APPROVAL)
    if key is not None:
        return list(waiting.filter(delivery__message__api_key=key))
    if trigger is not None:
        return list(waiting.filter(delivery__message__trigger=trigger))
    if user is not None:
        return list(waiting.filter(delivery__conversation__user=user))
    if connection is None:
        return []
    owned = waiting.filter(delivery__conversation__user_id=connection.owner_id)
    return [action for action in owned if any(step.connection_id == connection.pk for step in chain(action))]


def orphaned(now: datetime) -> list[Action]:
    """Requests still waiting whose asker went without telling (a key that expired, a row changed by hand): for the
    periodic sweep (delivery/housekeeping.py, ``expireapprovals``)."""
    asker_stopped = (
        Q(delivery__message__api_key__revoked_at__isnull=False)
        | Q(delivery__message__api_key__expires_at__lte=now)
        | Q(delivery__message__trigger__revoked_at__isnull=False)
        | Q(delivery__conversation__user__is_active=False)
        | Q(kind=ToolKind.MCP, connection__isnull=True)
    )
    return list(with_origin().filter(asker_stopped, state=ActionState.AWAITING_APPROVAL))
