"""What the built-in assistant understands, in English: a grammar of requests around the time readers of times.py.
Each message becomes one Intent: a tool call with its arguments (Act), the cancellation of a reminder named by its
words (CancelNamed: a listing, then a cancellation), a question back (Ask), a plain refusal (Refuse), an answer that
needs no tool (Answer), or nothing (None: not understood). Nothing here touches the database: the backend runs the
calls through the Toolbox.

A request is a sentence that asks for something: its verb or its question comes first ("list my webhooks", "what
reminders do I have?", "email bob@example.com that …"). A sentence that only mentions the words of a request ("Hello
from the legacy webhook", "The webhook for orders is broken", "I cleaned my inbox") is no request, and nothing
here matches it. tests/test_local_corpus.py measures that over a corpus of phrasings, intent by intent;
docs/explanation/local-assistant.md has the table."""

import re
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from assistant.local import about, events, mail, reminders, webhooks
from assistant.local.about import NOT_UNDERSTOOD
from assistant.local.meaning import INTENTS, Act, Answer, Ask, CancelNamed, Intent, One, Refuse, Several, intent_name
from assistant.local.phrases import caseless, is_answer, is_time_phrase, plain, sentences
from assistant.local.scheduling import ANSWER_HINT, Draft, answered, scheduled

__all__ = [
    "ANSWER_HINT", "INTENTS", "MAX_REQUEST", "NOT_UNDERSTOOD", "Act", "Answer", "Ask", "CancelNamed", "Intent",
    "Refuse", "Several", "intent_name", "understand",
]  # fmt: skip

# A request is a sentence; a longer text is a document or a payload, and the grammar's cost grows with its length.
MAX_REQUEST = 400
MAX_REQUESTS = 3
# Each sentence is offered to these in turn, the first that reads a request in it wins; a sentence none of them
# reads may still draft a reminder or an event (_draft).
_READERS = (
    about.answer, reminders.cancel, reminders.list_reminders, webhooks.webhooks, events.agenda,
    mail.search, mail.send, about.known_refusal, events.looked_up,
)  # fmt: skip


def understand(text: str, now: datetime, tools: Collection[str], earlier: str | None = None) -> Intent:
    """The intent of ``text``. ``now``: the person's local time (naive); ``tools``: the names the toolbox offers;
    ``earlier``: the person's previous message when the assistant's last reply asked them for a time.

    A message is read as a person reads it: sentence by sentence, a request after a report ("Deploy finished. Remind
    me to check the error rate in 30 minutes"), a report alone acts on nothing, and two or three requests are each
    carried out (Several)."""
    request = plain(text)
    if not request:
        return None
    if about.SUMMARIZE.match(request[:MAX_REQUEST]):
        return about.NOT_SUMMARIZED  # the rest is the text to summarize, never requests to act on
    if len(request) > MAX_REQUEST:
        return None  # a document or a payload
    if earlier is not None and is_answer(request):
        draft = _draft(plain(earlier))
        if draft is not None:
            return scheduled(answered(draft, request, now), now, tools)
    found = _requests(sentences(text), now, tools)
    if len(found) > 1:
        return Several(tuple(found[:MAX_REQUESTS]))
    return found[0] if found else None


def _requests(said: list[str], now: datetime, tools: Collection[str]) -> list[One]:
    """The request of each sentence that has one; the other sentences are its report."""
    found = []
    for index, sentence in enumerate(said):
        intent = _sentence(sentence, now, tools, report=" ".join(said[:index] + said[index + 1 :]))
        if intent is None or isinstance(intent, Several):
            continue
        if isinstance(intent, Answer) and len(said) > 1:
            continue  # "Help! My card was stolen": an exclamation, not a question to us
        found.append(intent)
    return found


# Where a request may start inside a sentence, after a report: "The backup failed on db-1: find out why and remind me
# at 9", "Build #512 failed - remind me in an hour to rerun it".
_CLAUSE = re.compile(r"\s*[:;]\s+|\s+[-–—]+\s+|,?\s+(?:and|so|then|also|please)\s+|,\s+")
_REQUEST_START = caseless(
    r"^(?:please\s+|can you\s+|could you\s+)?(?:remind me|wake me|get me up|set (?:an? |my )?(?:alarm|reminder)|"
    r"what(?:'s| is| are)? (?:on )?my|what reminders|show my|do i have|am i (?:free|busy)|any new|check my|email)\b"
)


def _sentence(sentence: str, now: datetime, tools: Collection[str], report: str) -> Intent:
    """One sentence's request: the whole sentence, or its last clause that starts like a request."""
    intent = _request(sentence, now, tools, report)
    if intent is not None:
        return intent
    for cut in _CLAUSE.finditer(sentence):
        tail = plain(sentence[cut.end() :])
        if _REQUEST_START.match(tail):
            before = f"{report} {sentence[: cut.start()]}".strip()
            return _request(tail, now, tools, before)
    return None


# A question asked inside a request ("tell me what's on my schedule", "let me know if I have any meetings") is read
# as the question itself.
_EMBEDDED = tuple(
    (caseless(pattern), replacement)
    for pattern, replacement in (
        (
            r"^(?:(?:can you |could you |please )?(?:tell me|let me know|inform me|show me|find out|check)|"
            r"i (?:want|need|would like|'d like) to know)(?: about)?\s+(?=what|when|which|who|how|if|whether|do)",
            "",
        ),
        (r"^(?:if|whether) i have\b", "do i have"),
        (r"^(?:if|whether) there (are|is)\b", r"\1 there"),
        (r"^(?:if|whether) i(?: am|'m)\b", "am i"),
        (r"^(?:if|whether) my (\w+) is\b", r"is my \1"),
        (r"^what i have\b", "what do i have"),
        (r"^(what|when|who|where)'s\b", r"\1 is"),
        (r"^(?:go |please )+(?=check|read|look)", ""),
        (r"^look at\b", "check"),
        (r"^(?:is it possible|would it be possible) (?:for you )?to\s+", ""),
        (
            r"^(?:i (?:need|want|would like|'d like)|get me) (an? (?:meeting|call|appointment)\b)(?: to be)?"
            r"(?: scheduled| set up| booked)?",
            r"schedule \1",
        ),
    )
)
_TIME_FIRST = re.compile(r"^([^,]{2,40}),\s+(.+)$")


def _asked(text: str) -> str:
    for expression, replacement in _EMBEDDED:
        text = expression.sub(replacement, text, count=1)
    first = _TIME_FIRST.match(text)
    if first is not None and is_time_phrase(first[1].split()) and not re.match(r"^remind\b", first[2], re.I):
        return f"{first[2]} {first[1]}"  # "at noon, schedule a meeting with Saul"
    return text


def _request(request: str, now: datetime, tools: Collection[str], report: str = "") -> Intent:
    request = _asked(request)
    for reader in _READERS:
        intent = reader(request, now, tools)
        if intent is not None:
            return intent
    draft = _draft(request)
    if draft is None:
        return None
    return scheduled(replace(draft, report=report), now, tools)


def _draft(text: str) -> Draft | None:
    return reminders.reminder(text) or events.event(text)
