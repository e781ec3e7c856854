"""Reads and writes of the thread that every floor above may use. Recording a person's message with its hand-off
is the request path's work: ingestion/hotpath/recording.py."""

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from conversations import outbound
from conversations.models import Conversation, Message, Role


def conversation_of(user: User) -> Conversation:
    try:
        return user.conversation
    except Conversation.DoesNotExist:
        return Conversation.objects.get_or_create(user=user)[0]


def assistant_message(
    conversation_id: int,
    text: str,
    *,
    source: str,
    context: Any = None,
    created_at: datetime | None = None,
    test: bool = False,
) -> Message:
    """A message from the assistant into a thread. A delivery's reply goes through delivery/lifecycle.py (which uses
    this on SQLite, and one statement on PostgreSQL); a reminder firing calls it directly."""
    with transaction.atomic():  # the message and its way to the person's phone together (conversations/outbound.py)
        message = Message.objects.create(
            conversation_id=conversation_id,
            role=Role.ASSISTANT,
            source=source,
            text=text,
            context=context,
            created_at=created_at or timezone.now(),
            test=test,  # the reply to a test key's message: kept apart with it (keys/models.py, test_mode)
        )
        outbound.written([message.pk])
    return message
