"""The built-in assistant: no network, no model. It confirms what it received, through which key, and what the
request carried, and says plainly that it takes no action. For `make run`, demos and tests."""

from typing import Any

from assistant.conversation import AssistantRequest
from assistant.outcomes import Reply
from conversations.models import Source

QUOTE_LIMIT = 280
MEMBERS_LISTED = 10


def deliver(request: AssistantRequest) -> Reply:
    parts = [_arrival(request)]
    if request.text:
        parts.append(f"You wrote: “{_shorten(request.text, QUOTE_LIMIT)}”.")
    summary = _context_summary(request.context)
    if summary:
        parts.append(summary)
    parts.append(
        "I am the built-in local assistant: I confirm receipt and take no action. "
        "Set ASSISTANT_BACKEND to webhook or openai to connect a real assistant."
    )
    return Reply(" ".join(parts))


def _arrival(request: AssistantRequest) -> str:
    if request.key is not None:
        return f"Received through your API key “{request.key.name}” ({request.key.hint})."
    if request.source == Source.WEBHOOK_TRIGGER:
        return "Received through one of your webhook triggers."
    if request.source == Source.TOOL_FOLLOW_UP:
        return "Received a follow-up from a tool."
    if request.source in (Source.SMS, Source.WHATSAPP, Source.IMESSAGE, Source.TELEGRAM):
        return f"Received by {Source(request.source).label}."
    return "Received from the app."


def _context_summary(context: Any) -> str:
    if not isinstance(context, dict):
        return ""
    others = [(name, value) for name, value in context.items() if name != "message"]
    if not others:
        return ""
    described = [f"{name} ({_describe(value)})" for name, value in others[:MEMBERS_LISTED]]
    if len(others) > MEMBERS_LISTED:
        described.append(f"and {len(others) - MEMBERS_LISTED} more")
    noun = "member" if len(others) == 1 else "members"
    return f"The request also carried {len(others)} other {noun}: {', '.join(described)}."


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with {_count(len(value), 'member')}"
    if isinstance(value, list):
        return f"a list of {_count(len(value), 'item')}"
    if isinstance(value, str):
        return f"text “{_shorten(value, 60)}”"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return f"the number {value}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
