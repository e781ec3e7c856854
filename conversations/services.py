"""Writes to the thread. Every entry point (the two endpoints, the console) records messages through here."""

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Model

from conversations.inserts import insert_together
from conversations.models import Conversation, Delivery, Endpoint, Message, Role, Source
from conversations.tasks import announce_enqueued, enqueue_delivery, new_task_row
from keys.models import ApiKey
from keys.services import note_key_used

_SOURCE_OF_ENDPOINT = {
    Endpoint.CURRENT: Source.API,
    Endpoint.LEGACY: Source.LEGACY_WEBHOOK,
    Endpoint.CONSOLE: Source.APP,
}


def conversation_of(user: User) -> Conversation:
    try:
        return user.conversation
    except Conversation.DoesNotExist:
        conversation, _ = Conversation.objects.get_or_create(user=user)
        return conversation


def record_user_message(
    *,
    user: User,
    endpoint: Endpoint,
    text: str,
    context: dict[str, Any] | None = None,
    api_key: ApiKey | None = None,
    request_id: str = "",
) -> Message:
    """Record a message in the user's thread, its delivery record and the task that hands it to the assistant,
    together or not at all (DESIGN.md, "Conversations and the assistant hand-off"): with the database task
    backend on PostgreSQL, in one statement."""
    # Keys by id rather than by instance: nothing reads the related objects back from these rows, and setting an
    # instance goes through Django's related-object descriptor (type and router checks, caches) for each.
    api_key_id = None if api_key is None else api_key.pk
    message = Message(
        conversation_id=conversation_of(user).pk,
        role=Role.USER,
        source=_SOURCE_OF_ENDPOINT[endpoint],
        text=text,
        context=context,
        api_key_id=api_key_id,
    )
    delivery = Delivery(
        message=message,  # an instance: its key exists only once the statement has inserted it
        api_key_id=api_key_id,
        endpoint=endpoint,
        request_id=request_id,
        backend=settings.ASSISTANT_BACKEND,
    )
    task_row = new_task_row(message.public_id)
    rows: list[Model] = [message, delivery] if task_row is None else [message, delivery, task_row]
    insert_together(rows)
    if task_row is None:
        enqueue_delivery(message.public_id)  # after the commit: the backend is not in the database
    else:
        announce_enqueued(task_row)
    if api_key is not None:
        note_key_used(api_key)
    return message
