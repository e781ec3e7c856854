"""Where the words that led to a call came from, for the approval rule (assistant/approval/rule.py, ``decide``).

A message's origin is its key's or trigger's, or the person's. A tool's follow-up and the person's approval are
recorded with the key or trigger of the message whose call led to them (ingestion/followups.py,
ingestion/approvals.py), so the origin holds all the way down; their own words are outside words anyway (a tool's
server wrote the follow-up, the approval quotes a call the model was led to).

A backend that hands the model the thread (the chat-completions one) makes the model read the words of others in it:
``thread_holds_outside_words`` says whether the window it reads holds any. The person's own messages, and the
assistant's replies to them when nothing outside was read to write them, are the person's; everything else is not:
a key's, a trigger's or a follow-up's message, an approval, the replies to those, a reply written after a tool
brought outside words (``Action.read_outside``), and the assistant's notices (a reminder's text, a request for
approval quoting a call). A reply is judged by what its own attempt read, not by the window that attempt read in
turn: the window moves on (ASSISTANT_THREAD_MESSAGES) and the outside words leave it with their message."""

from collections.abc import Iterable

from django.db.models import Exists, OuterRef

from assistant.approval.rule import Origin
from assistant.models import Action
from conversations.models import AssistantBackend, Message, Role, Source

# What the person typed: in the console, or on a phone linked to their account (channels/).
PERSON_SOURCES = frozenset({Source.APP, Source.SMS, Source.WHATSAPP, Source.IMESSAGE, Source.TELEGRAM})
# A message whose own words came from outside the person, whatever its origin.
OUTSIDE_WORDS_SOURCES = frozenset({Source.TOOL_FOLLOW_UP, Source.APPROVAL})
# Sources that name their origin when its key or trigger row is gone (SET_NULL): never taken for the person's.
_KEY_SOURCES = frozenset({Source.API, Source.LEGACY_WEBHOOK})


def origin_of(message: Message) -> Origin:
    if message.api_key_id is not None or message.source in _KEY_SOURCES:
        return Origin.KEY
    if message.trigger_id is not None or message.source == Source.WEBHOOK_TRIGGER:
        return Origin.TRIGGER
    if message.source in PERSON_SOURCES or message.source in OUTSIDE_WORDS_SOURCES:
        return Origin.PERSON  # a follow-up or an approval of the person's own call: its words count as outside
    return Origin.KEY  # a source this rule does not know: never the person's


def words_from_outside(message: Message) -> bool:
    """Whether the message's own words came from outside the person (a follow-up, an approval quoting a call)."""
    return message.source in OUTSIDE_WORDS_SOURCES


def thread_holds_outside_words(message_ids: Iterable[str]) -> bool:
    """Whether any of these messages of the thread (the window a backend hands the model) holds words from outside
    the person (see the module)."""
    ids = list(message_ids)
    if not ids:
        return False
    read = Action.objects.filter(delivery=OuterRef("answered_delivery"), read_outside=True)
    rows = (
        Message.objects.filter(public_id__in=ids)
        .annotate(read=Exists(read))
        .values_list("role", "source", "answered_delivery__backend", "answered_delivery__message__source", "read")
    )
    return any(_outside(*row) for row in rows)


def _outside(role: str, source: str, backend: str | None, answered: str | None, read: bool) -> bool:
    if role == Role.USER:
        return source not in PERSON_SOURCES
    if role != Role.ASSISTANT:
        return True  # a tool's follow-up
    if backend == AssistantBackend.LOCAL:
        return False  # the built-in assistant's receipts are not handed to a model (assistant/backends/openai.py)
    if answered is None:
        return True  # a notice: a reminder's text, a request for approval, what became of one
    return answered not in PERSON_SOURCES or read
