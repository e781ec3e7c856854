"""What every backend is told about a message: the message, its context, the recent thread and who sent it."""

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from conversations.models import Message, Source

# What the person wrote on a linked phone or chat (channels/inbound.py records these).
CHANNEL_SOURCES = frozenset({Source.SMS, Source.WHATSAPP, Source.IMESSAGE, Source.TELEGRAM})


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

    def __post_init__(self) -> None:
        # Whichever way the request is built (the claim's one statement on PostgreSQL, or the ORM), the backends
        # see only what they may be offered.
        object.__setattr__(self, "context", offered_context(self.source, self.text, self.context))


def recent_thread(message: Message) -> list[ThreadEntry]:
    """The last ASSISTANT_THREAD_MESSAGES messages of the conversation up to and including this one."""
    recent = (
        Message.objects.filter(
            conversation_id=message.conversation_id, created_at__lte=message.created_at, test=message.test
        )
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


def offered_context(source: str, text: str, context: Any) -> Any:
    """What an assistant is offered beside the text. A message the person wrote on a linked channel is their words
    only: what our inbound code attached (the channel, their address, the provider's message id, when the provider
    says it was sent, the provider's media ids and links) stays on the message for staff and for receipts, and is
    never offered to the assistant, which would read it back to the person as if they had sent it. Their
    attachments are named by kind alone. Any other message offers what its sender sent (an API caller's JSON)."""
    if source not in CHANNEL_SOURCES:
        return context
    offered: dict[str, Any] = {"message": text}
    media = context.get("media") if isinstance(context, dict) else None
    if isinstance(media, list) and media:
        offered["attachments"] = [_kind_of(item) for item in media]
    return offered


def _kind_of(item: Any) -> str:
    """ "image/jpeg", or "a photo" when the provider says only that; never its id or its link."""
    if isinstance(item, str):
        return item[:100]  # already named
    if not isinstance(item, dict):
        return "a file"
    kind = str(item.get("contentType") or item.get("kind") or "a file")
    return kind[:100]
