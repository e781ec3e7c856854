"""The built-in assistant: no network, no model, and it acts. It understands a few requests in English
(assistant/local/intents.py: reminders once or repeating, listing and cancelling them, the calendar and unread mail
when they are connected, the person's webhooks) and carries them out through the same Toolbox as the model-backed
assistant, so every call is an Action shown under the reply and on the receipt. It asks back when a time is unclear,
and says plainly what it cannot do. Times are the person's (the profile's time zone)."""

import json
import time
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from assistant.approval.rule import Verdict
from assistant.approval.text import in_words
from assistant.conversation import CHANNEL_SOURCES, AssistantRequest
from assistant.local import replies
from assistant.local.intents import (
    ANSWER_HINT,
    MAX_REQUEST,
    NOT_UNDERSTOOD,
    Act,
    Answer,
    Ask,
    CancelNamed,
    Intent,
    Refuse,
    Several,
    understand,
)
from assistant.outcomes import Reply
from assistant.tools import Toolbox
from assistant.tools.toolbox import toolbox_for_request
from conversations.models import Role, Source


def approval_needed(what: str) -> str:
    """The reply while a call waits for the person (the request itself went to the thread and their phone)."""
    first = what.split("\n", 1)[0]  # the sentence; the request itself shows the rest (a mail's first lines)
    return f"I need your approval before I {first[:1].lower()}{first[1:]} Nothing is done until you approve it."


QUOTE_LIMIT = 280
MEMBERS_LISTED = 10


def deliver(request: AssistantRequest, now: datetime | None = None) -> Reply:
    """Times are read from when the person sent the message ("in 20 minutes" is 20 minutes after they wrote it), so
    an attempt that replays a lost one makes the very same calls, which the tool ledger then does not repeat; ``now``
    (aware) stands for that moment in tests. Everything is said in the person's time zone."""
    toolbox = toolbox_for_request(request)
    if toolbox is None or not request.text.strip():
        return Reply(_receipt(request))
    toolbox.follows_results = False  # its calls come from the person's words and its own code, never from a result
    zone = ZoneInfo(toolbox.time_zone)  # read with the toolbox: an attempt thread holds no connection
    local_now = (now or _sent_at(request)).astimezone(zone).replace(tzinfo=None)
    text = request.text
    if request.source == Source.APPROVAL:
        return Reply(_approved(text))
    if request.source == Source.WEBHOOK_TRIGGER:
        text = text.split("\n", 1)[0]  # the trigger's action; the next line only says which trigger fired
    intent = understand(text, local_now, toolbox.tools.keys(), earlier=_asked_about(request))
    return Reply(_Turn(toolbox, zone, local_now).carry_out(intent, request))


def _sent_at(request: AssistantRequest) -> datetime:
    try:
        sent = datetime.fromisoformat(request.created_at)
    except ValueError:
        return timezone.now()
    return sent if sent.tzinfo is not None else timezone.now()


def _asked_about(request: AssistantRequest) -> str | None:
    """The person's earlier message when this one answers our question about its time."""
    thread = request.thread
    if len(thread) >= 3 and thread[-1].id == request.message_id:
        question, earlier = thread[-2], thread[-3]
        if question.role == Role.ASSISTANT and question.text.endswith(ANSWER_HINT) and earlier.role == Role.USER:
            return earlier.text
    return None


class _Turn:
    """One answer: its tool calls, numbered like a model's, within the same time limit as the model's."""

    def __init__(self, toolbox: Toolbox, zone: ZoneInfo, now: datetime) -> None:
        self.toolbox, self.zone, self.now = toolbox, zone, now
        self.calls = 0
        self.deadline = time.monotonic() + settings.ASSISTANT_TOOL_SECONDS

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """(result, ok) of one call through the toolbox, which records it as an Action, or asks the person first
        (the one decision, assistant/approval/rule.py: a mail always asks)."""
        self.calls += 1
        result = self.toolbox.call(f"local_{self.calls}", tool, arguments, 1, self.deadline)
        failed = result.startswith("Error: ")
        return result.removeprefix("Error: "), not failed

    def carry_out(self, intent: Intent, request: AssistantRequest) -> str:
        if isinstance(intent, Several):  # each request in turn, each call under the same approval rules as alone
            return "\n\n".join(self.carry_out(one, request) for one in intent.intents)
        if isinstance(intent, Act):
            return self.act(intent)
        if isinstance(intent, CancelNamed):
            return self.cancel(intent.words)
        if isinstance(intent, Ask):
            return intent.question
        if isinstance(intent, Refuse):
            return intent.reason
        if isinstance(intent, Answer):
            return intent.text
        if request.source in (Source.WEBHOOK_TRIGGER, Source.TOOL_FOLLOW_UP) or _context_summary(request.context):
            return _receipt(request)
        payload = _payload(request.text)
        if payload:
            return payload
        if len(request.text) > MAX_REQUEST:
            return _long_text(request.text)
        return NOT_UNDERSTOOD

    def waits(self, tool: str) -> bool:
        """Whether the call only asks the person's approval (a key's or a trigger's message, a tool that changes
        something, a mail): assistant/approval/requests.py asks them in the thread and carries it out once
        they approve."""
        found = self.toolbox.tools.get(tool)
        return found is not None and self.toolbox.verdict(found) is Verdict.ASK

    def act(self, intent: Act) -> str:
        result, ok = self.call(intent.tool, intent.arguments)
        if not ok:
            return f"I couldn't do that: {result}"
        if self.waits(intent.tool):
            return approval_needed(in_words(intent.tool, intent.arguments, self.zone))
        if intent.done and intent.tool != "calendar_list_events":
            return intent.done + self.zone_hint()
        if intent.tool == "list_reminders":
            return replies.reminders(result, self.now)
        if intent.tool == "list_webhook_triggers":
            return replies.webhooks(result)
        if intent.tool == "calendar_list_events":
            return replies.events(result, intent.done, self.zone, self.now)
        return replies.mail(result, unread=bool(intent.arguments.get("unseen")))

    def zone_hint(self) -> str:
        if self.zone.key != "UTC":
            return ""
        return " (That is UTC: set your time zone under Settings if you live elsewhere.)"

    def cancel(self, words: str) -> str:
        result, ok = self.call("list_reminders", {})
        if not ok:
            return f"I couldn't look at your reminders: {result}"
        found = replies.parsed(result, "reminders") or []
        if not found:
            return "You have no reminders scheduled."
        matching = [item for item in found if _matches(item, words)] if words else []
        if len(matching) != 1:
            listed = "\n".join(f"- {replies.reminder_line(item, self.now)}" for item in found[: replies.LISTED])
            if not words or len(matching) > 1:
                return f"Which one should I cancel? Say “cancel the … reminder” with its words:\n{listed}"
            return f"I found no reminder about “{words}”. Your reminders:\n{listed}"
        result, ok = self.call("cancel_reminder", {"id": matching[0]["id"]})
        if not ok:
            return f"I couldn't cancel it: {result}"
        if self.waits("cancel_reminder"):
            return approval_needed(f"Cancel your reminder “{matching[0].get('text', '')}”.")
        return f"Cancelled your reminder “{matching[0].get('text', '')}”."


def _approved(text: str) -> str:
    """The person approved a call this assistant asked for; the wrapper (assistant/backends/approved.py) ran it and
    hands over "I approved …. Result: …": say how it went."""
    _, found, result = text.partition("Result: ")
    if not found:
        return text
    if result.startswith("Error: "):
        return f"I couldn't do it after all: {result.removeprefix('Error: ')}"
    return f"Done. {result}"


def _matches(item: dict[str, Any], words: str) -> bool:
    if words.startswith("rem_"):
        return item.get("id") == words
    text = str(item.get("text", "")).lower()
    return all(word in text for word in words.lower().split())


# --- a message that is not a request in words (a webhook's payload, a JSON body without text) -------------------


def _receipt(request: AssistantRequest) -> str:
    parts = [_arrival(request)]
    if request.text:
        parts.append(f"You wrote: “{_shorten(request.text, QUOTE_LIMIT)}”.")
    summary = _attachments(request) if request.source in CHANNEL_SOURCES else _context_summary(request.context)
    if summary:
        parts.append(summary)
    # Automations send these, often: one line on what it can do, not the whole list ("Sorry, I didn't understand").
    parts.append("I found no request in it that I can act on (I understand requests such as “remind me to …”).")
    return " ".join(parts)


def _payload(text: str) -> str:
    """The answer to a message that is a JSON document rather than words (a script posting its payload as text)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return ""
    try:
        found = json.loads(stripped)
    except ValueError:
        return ""
    if isinstance(found, dict):
        names = ", ".join(_shorten(str(name), 40) for name in list(found)[:MEMBERS_LISTED])
        more = f" and {len(found) - MEMBERS_LISTED} more" if len(found) > MEMBERS_LISTED else ""
        shape = f"an object with {_count(len(found), 'member')}" + (f" ({names}{more})" if found else "")
    elif isinstance(found, list):
        shape = f"a list of {_count(len(found), 'item')}"
    else:
        return ""
    return (
        f"That is a JSON payload ({shape}), not a request in words, so I took no action. I act on requests such as "
        "“remind me to …”; to have a payload read and acted on, this server needs a model (ASSISTANT_BACKEND=openai)."
    )


def _long_text(text: str) -> str:
    """The answer to a text longer than a request (a document, a log): what it is and what can be done with it."""
    return (
        f"That is a long text ({len(text):,} characters), and I read requests of up to {MAX_REQUEST} characters, "
        "such as “remind me to …”. I can't summarize or answer questions about a text without a language model: "
        "this server needs one for that (ASSISTANT_BACKEND=openai)."
    )


def _attachments(request: AssistantRequest) -> str:
    """What the person sent besides words, by kind (the only thing of the kind assistant/conversation.py offers)."""
    kinds = request.context.get("attachments") if isinstance(request.context, dict) else None
    if not isinstance(kinds, list) or not kinds:
        return ""
    return f"It came with {_count(len(kinds), 'attachment')} ({', '.join(str(kind) for kind in kinds[:5])})."


def _arrival(request: AssistantRequest) -> str:
    if request.key is not None:
        return f"Received through your API key “{request.key.name}” ({request.key.hint})."
    if request.source == Source.WEBHOOK_TRIGGER:
        return "Received through one of your webhook triggers."
    if request.source == Source.TOOL_FOLLOW_UP:
        return "Received a follow-up from a tool."
    if request.source in CHANNEL_SOURCES:
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
