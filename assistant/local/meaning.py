"""What a message means to the built-in assistant: one Intent (see intents.py), and which of INTENTS it is."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Act:
    tool: str
    arguments: dict[str, Any]
    done: str = ""  # the reply when the call succeeds; empty: the reply is made from the call's result


@dataclass(frozen=True, slots=True)
class CancelNamed:
    words: str  # words of the reminder's text, or its id; empty: which one is asked


@dataclass(frozen=True, slots=True)
class Ask:
    question: str
    about: str = field(default="", compare=False)  # the intent it is about (INTENTS)


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str
    about: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    about: str = field(default="", compare=False)


One = Act | CancelNamed | Ask | Refuse | Answer  # what one request of a message means


@dataclass(frozen=True, slots=True)
class Several:
    """Two or three requests in one message ("Remind me to call Sam at 5. What's on my calendar tomorrow?"): each is
    carried out, or asked back about, in turn."""

    intents: tuple[One, ...]


Intent = One | Several | None

# What the built-in assistant understands, by name: the tool an intent calls, or what it answers itself.
INTENTS = (
    "schedule_reminder",
    "list_reminders",
    "cancel_reminder",
    "list_webhook_triggers",
    "change_webhooks",  # refused: the Webhooks page does that
    "calendar_list_events",
    "calendar_create_event",
    "change_events",  # refused: without a model it only lists and adds
    "mail_search",
    "mail_send",
    "other_mail",  # forwarding, replying: refused
    "summarize",  # refused: a text to summarize, translate or rewrite needs a model
    "help",
)


def intent_name(intent: Intent) -> str | None:
    """Which of INTENTS ``intent`` is (None: not understood)."""
    if isinstance(intent, Act):
        return intent.tool
    if isinstance(intent, CancelNamed):
        return "cancel_reminder"
    if isinstance(intent, (Ask, Refuse, Answer)):
        return intent.about or None
    if isinstance(intent, Several):
        return intent_name(intent.intents[0])
    return None
