"""Reads and writes of the thread that every floor above may use. Recording a person's message with its hand-off
is the request path's work: ingestion/hotpath/recording.py."""

from django.contrib.auth.models import User

from conversations.models import Conversation


def conversation_of(user: User) -> Conversation:
    try:
        return user.conversation
    except Conversation.DoesNotExist:
        conversation, _ = Conversation.objects.get_or_create(user=user)
        return conversation
