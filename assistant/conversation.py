"""What every backend is told about a message: the message, its context, the recent thread and who sent it."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from conversations.models import Message


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """The key a message came through, as the user knows it: never the secret, never its digest."""

    id: int
    name: str
    hint: str


@dataclass(frozen=True, slots=True)
class ThreadEntry:
    id: str
    role: str
    text: str
    created_at: str
    # For a reply: the assistant backend that wrote it (local, webhook, openai); "" for anything else. A backend
    # switched to later tells another's replies from its own (the local assistant's are receipts, not answers).
    replied_by: str = ""


@dataclass(frozen=True, slots=True)
class AssistantRequest:
    message_id: str
    text: str
    context: Any
    source: str
    created_at: str
    user_id: int
    key: KeyInfo | None
    thread: list[ThreadEntry]  # oldest first, ending with this message
    attempt: int


def recent_thread(message: Message) -> list[ThreadEntry]:
    """The last ASSISTANT_THREAD_MESSAGES messages of the conversation up to and including this one."""
    recent = (
        Message.objects.filter(conversation_id=message.conversation_id, created_at__lte=message.created_at)
        .exclude(pk__gt=message.pk, created_at=message.created_at)
        .order_by("-created_at", "-pk")
        .values_list("public_id", "role", "text", "created_at", "answered_delivery__backend")[
            : settings.ASSISTANT_THREAD_MESSAGES
        ]
    )
    return [
        ThreadEntry(id=public_id, role=role, text=text, created_at=created_at.isoformat(), replied_by=backend or "")
        for public_id, role, text, created_at, backend in reversed(list(recent))
    ]


def build_request(message: Message, attempt: int) -> AssistantRequest:
    key = message.api_key
    return AssistantRequest(
        message_id=message.public_id,
        text=message.text,
        context=message.context,
        source=message.source,
        created_at=message.created_at.isoformat(),
        user_id=message.conversation.user_id,
        key=KeyInfo(id=key.pk, name=key.name, hint=key.hint) if key is not None else None,
        thread=recent_thread(message),
        attempt=attempt,
    )
