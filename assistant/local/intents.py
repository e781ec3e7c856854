"""What the built-in assistant understands, in English: a grammar of requests around the time readers of times.py.
Each message becomes one Intent: a tool call with its arguments (Act), the cancellation of a reminder named by its
words (CancelNamed: a listing, then a cancellation), a question back (Ask), a plain refusal (Refuse), or nothing
(None: not understood). Nothing here touches the database: the backend runs the calls through the Toolbox."""

import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from assistant.local import times
from assistant.local.phrases import LEAD, is_answer, is_time_phrase, plain, split_when, yours

# Every question about a time ends so: the person's next message, when it is only a time, answers it.
ANSWER_HINT = "(Just reply with the time.)"
CALENDAR_TOOLS = ("calendar_list_events", "calendar_create_event")
MAIL_TOOL = "mail_search"
# A request is a sentence; a longer text is a document or a payload, and the grammar's cost grows with its length.
MAX_REQUEST = 400
NO_CALENDAR = "No calendar is connected: add one under Connections, then ask me again."
NO_MAILBOX = "No mailbox is connected: add one under Connections, then ask me again."


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


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str


Intent = Act | CancelNamed | Ask | Refuse | None


@dataclass(frozen=True, slots=True)
class _Draft:
    """A request that needs a time: a reminder or a calendar event, before the time is read."""

    kind: str  # "reminder" or "event"
    what: str
    when: str = ""
    connector: str = "to"  # remind you to / about / that …
    minutes: int = 60  # an event's length
    extra: dict[str, Any] = field(default_factory=dict)


def understand(text: str, now: datetime, tools: Collection[str], earlier: str | None = None) -> Intent:
    """The intent of ``text``. ``now``: the person's local time (naive); ``tools``: the names the toolbox offers;
    ``earlier``: the person's previous message when the assistant's last reply asked them for a time."""
    request = plain(text)
    if not request or len(request) > MAX_REQUEST:
        return None
    if earlier is not None and is_answer(request):
        draft = _draft(plain(earlier))
        if draft is not None:
            return _scheduled(_answered(draft, request, now), now, tools)
    for reader in (_cancel, _list_reminders, _webhooks, _agenda, _mail):
        intent = reader(request, now, tools)
        if intent is not None:
            return intent
    draft = _draft(request)
    if draft is not None:
        return _scheduled(draft, now, tools)
    return _known_refusal(request)


# --- reminders --------------------------------------------------------------------------------------------------

_REMIND = re.compile(
    r"^(?:remind me|(?:set|add|create|make|schedule) (?:me )?(?:a |an )?reminder|new reminder|reminder)\b:?\s*(.*)$",
    re.I,
)
_WAKE = re.compile(r"^wake me(?: up)?\s*(.*)$", re.I)
_WHEN_FIRST = re.compile(r"^(.+?),?\s+remind me\b\s*(.*)$", re.I)
_CONNECTOR = re.compile(r"^(to|about|that|of|for)\s+(.*)$", re.I)
_INNER_CONNECTOR = re.compile(r"\s(to|about|that)\s", re.I)


def _reminder(text: str) -> _Draft | None:
    first = _WHEN_FIRST.match(text)
    if first is not None and is_time_phrase(first[1].split()):
        connector, what = _connected(first[2])
        return _both_times(_Draft("reminder", what, first[1], connector))
    woken = _WAKE.match(text)
    if woken is not None:
        return _Draft("reminder", "wake up", woken[1], "to")
    found = _REMIND.match(text)
    if found is None:
        return None
    rest = found[1]
    connected = _CONNECTOR.match(rest)
    if connected is not None and connected[1].lower() == "for":
        rest = connected[2]  # "a reminder for 3pm to stretch", "a reminder for the dentist at 3pm"
    for inner in _INNER_CONNECTOR.finditer(rest):  # "remind me at 3pm to stretch"
        if is_time_phrase(rest[: inner.start()].split()):
            return _both_times(_Draft("reminder", rest[inner.end() :], rest[: inner.start()], inner[1].lower()))
    connector, body = _connected(rest)
    what, when = split_when(body)
    return _Draft("reminder", what, when, connector)


def _both_times(draft: _Draft) -> _Draft:
    """ "remind me each Friday to submit the timesheet at 4pm": the time said before the text and the one after."""
    what, after = split_when(draft.what)
    return replace(draft, what=what, when=f"{draft.when} {after}") if after else draft


def _connected(text: str) -> tuple[str, str]:
    found = _CONNECTOR.match(text)
    if found is None:
        return "about", text  # "set a reminder: team standup at 9:15"
    return ("about" if found[1].lower() == "for" else found[1].lower()), found[2]


_LIST_REMINDERS = re.compile(
    r"^(?:(?:what|which|show|list|see|view|tell me|do i have|have i got|get|check)\b.*\breminders?\b.*"
    r"|(?:(?:all|my|upcoming|active|scheduled|current)\s+)*reminders)$",
    re.I,
)


def _list_reminders(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if _LIST_REMINDERS.match(text) and not _REMIND.match(text):
        return Act("list_reminders", {})
    return None


_CANCEL = re.compile(
    r"^(?:cancel|delete|remove|stop|clear|drop|forget|turn off|disable|unschedule|get rid of)\s+"
    r"(.*\breminders?\b.*|rem_[A-Za-z0-9]+)$",
    re.I,
)
_FILLER = {"the", "my", "a", "an", "reminder", "reminders", "to", "about", "for", "that", "of", "called", "named", "me"}


def _cancel(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _CANCEL.match(text)
    if found is None:
        return None
    named, _ = split_when(found[1])
    reminder_id = re.search(r"\brem_[A-Za-z0-9]+", named)
    if reminder_id is not None:
        return CancelNamed(reminder_id[0])
    words = [word for word in re.findall(r"[\w'-]+", named.lower()) if word not in _FILLER]
    if words and all(word in {"all", "every", "them", "each"} for word in words):
        words = []  # "cancel all my reminders": one at a time, asked by name
    return CancelNamed(" ".join(words))


# --- calendar, mail, webhooks -------------------------------------------------------------------------------------

_WEBHOOKS = re.compile(r"\b(?:web ?hooks?|webhook triggers?|triggers)\b", re.I)
_CHANGE = re.compile(r"^(?:add|create|make|set up|new|delete|remove|revoke|cancel|disable|change|edit|rename)\b", re.I)


def _webhooks(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _WEBHOOKS.search(text):
        return None
    if _CHANGE.match(text):
        return Refuse("I can't create or remove webhooks myself: the Webhooks page does that.")
    return Act("list_webhook_triggers", {})


_AGENDA = re.compile(
    r"^(?:what do i have|what have i got|what'?s|what is|what|which|show(?: me)?|list|tell me|check|see|view|"
    r"do i have|have i got|is there|are there|any|anything|am i free|am i busy)\b(.*)$",
    re.I,
)
_A_DAY = re.compile(
    r"^\s*(?:on\s+)?(?:today|tomorrow|this week|next week|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b", re.I
)
_MY_CALENDAR = re.compile(r"\b(?:calendar|agenda)\b", re.I)
_MINE = re.compile(r"\b(?:my|i have|i got|today|tomorrow|tonight|this week|next week|on \w+day)\b", re.I)
_CALENDAR_WORDS = re.compile(r"\b(?:calendar|agenda|schedule|events?|meetings?|appointments?|plans?)\b", re.I)


def _agenda(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _AGENDA.match(text)
    if found is None or "reminder" in text.lower():
        return None
    asked = found[1]
    if not (
        _MY_CALENDAR.search(asked) or _A_DAY.match(asked) or (_CALENDAR_WORDS.search(asked) and _MINE.search(asked))
    ):
        return None  # "show me the events of the webhook" is not about the calendar
    if CALENDAR_TOOLS[0] not in tools:
        return Refuse(NO_CALENDAR)
    start, end, label = _days(found[1], now)
    return Act(
        "calendar_list_events",
        {"start": start.isoformat(timespec="minutes"), "end": end.isoformat(timespec="minutes")},
        done=label,
    )


def _days(text: str, now: datetime) -> tuple[datetime, datetime, str]:
    """The span a question about the calendar means: today unless it names a day or a week."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    lowered = text.lower()
    if "tomorrow" in lowered:
        return midnight + timedelta(days=1), midnight + timedelta(days=2), "tomorrow"
    if "next week" in lowered:
        monday = midnight + timedelta(days=7 - midnight.weekday())
        return monday, monday + timedelta(days=7), "next week"
    if "this week" in lowered or "week" in lowered:
        return now.replace(second=0, microsecond=0), midnight + timedelta(days=7 - midnight.weekday()), "this week"
    rest = " ".join(re.sub(r"\b(?:on|my|the|in|for|do|i|have|got|is|there|anything|what|s)\b", " ", lowered).split())
    rest = " ".join(_CALENDAR_WORDS.sub(" ", rest).split())
    day = times.day_named(rest, now) if rest else None
    if day is not None:
        return day, day + timedelta(days=1), times.day(day, now)
    return midnight, midnight + timedelta(days=1), "today"


_MAIL = re.compile(
    r"\b(?:unread|new|latest|recent)\s+(?:e-?mails?|mails?|messages in my inbox)\b"
    r"|\b(?:check|show|read|list|open)\s+(?:me\s+)?(?:my\s+)?(?:e-?mails?|mail|inbox)\b|\bmy inbox\b"
    r"|\b(?:any|got)\s+(?:new\s+)?(?:e-?mails?|mail)\b",
    re.I,
)


def _mail(text: str, now: datetime, tools: Collection[str]) -> Intent:
    if not _MAIL.search(text) or _SEND_MAIL.search(text):
        return None
    if MAIL_TOOL not in tools:
        return Refuse(NO_MAILBOX)
    return Act(MAIL_TOOL, {"unseen": True})


_ADD_EVENT = re.compile(
    r"^(?:add|schedule|put|book|create|plan|set up|block)\s+"
    r"(?:an? event\s+|an? (?:event|meeting|appointment) (?:called|named|for)\s+)?(?:an?\s+|the\s+)?"
    r"(.+)$",
    re.I,
)
_ON_CALENDAR = re.compile(r"\s+(?:to|on|in|into) (?:my |the )?calendar\b", re.I)
_LENGTH = re.compile(r"\s+for (?:(\d{1,3}|an?|one|two|three|half an?) )?(hours?|minutes?|mins?)\b", re.I)


def _event(text: str) -> _Draft | None:
    found = _ADD_EVENT.match(_ON_CALENDAR.sub("", text))
    if found is None or "reminder" in text.lower():
        return None
    body, minutes = found[1], 60
    length = _LENGTH.search(body)
    if length is not None:
        spelled = {"a": 1.0, "an": 1.0, "one": 1.0, "two": 2.0, "three": 3.0, "half a": 0.5, "half an": 0.5}
        amount = spelled.get((length[1] or "a").lower()) or float(length[1])
        minutes = int(amount * (60 if length[2].lower().startswith("h") else 1))
        body = body[: length.start()] + body[length.end() :]
    what, when = split_when(body)
    if not when and not re.search(r"\bcalendar\b", text, re.I):
        return None  # "add milk": not an event
    return _Draft("event", what, when, minutes=max(5, min(minutes, 24 * 60)))


# --- scheduling a draft ---------------------------------------------------------------------------------------------


def _draft(text: str) -> _Draft | None:
    return _reminder(text) or _event(text)


def _answered(draft: _Draft, answer: str, now: datetime) -> _Draft:
    """The draft with the time the person gave in answer to our question."""
    meridiem = re.fullmatch(r"(?:in the )?(am|pm|a\.m\.?|p\.m\.?|morning|afternoon|evening)", answer, re.I)
    if meridiem is not None and times.has_bare_hour(draft.when):
        word = meridiem[1].lower().replace(".", "")
        suffix = {"morning": "am", "afternoon": "pm", "evening": "pm"}.get(word, word)
        return replace(draft, when=times.with_meridiem(draft.when, suffix))
    if not LEAD.match(answer.split()[0]):
        answer = f"at {answer}"
    combined = f"{times.without_bare_hour(draft.when)} {answer}".strip()
    try:
        times.read(combined, now)
    except (times.Unclear, times.Impossible):
        return replace(draft, when=answer)
    return replace(draft, when=combined)


def _scheduled(draft: _Draft, now: datetime, tools: Collection[str]) -> Intent:
    if draft.kind == "event" and CALENDAR_TOOLS[1] not in tools:
        return Refuse(NO_CALENDAR)
    what = draft.what.strip(" ,")
    action = _action(draft, what)
    if not what:
        return Ask("What should I remind you of?" if draft.kind == "reminder" else "What should I call the event?")
    if not draft.when:
        return Ask(f"When should I {action}? {ANSWER_HINT}")
    try:
        when = times.read(draft.when, now)
    except times.Unclear as unclear:
        return Ask(f"{unclear.question.format(action=action)} {ANSWER_HINT}")
    except times.Impossible as impossible:
        return Refuse(str(impossible))
    if draft.kind == "event":
        return _event_call(what, when, draft.minutes, now)
    return _reminder_call(what, when, action, now)


def _action(draft: _Draft, what: str) -> str:
    if draft.kind == "event":
        return f"put “{what[:1].upper()}{what[1:]}” in your calendar"
    return f"remind you {draft.connector} {yours(what)}"


def _reminder_call(what: str, when: times.When, action: str, now: datetime) -> Act:
    text = what[0].upper() + what[1:]
    if isinstance(when, times.Once):
        arguments = {"text": text, "when": when.at.isoformat(timespec="minutes")}
        return Act("schedule_reminder", arguments, done=f"Okay! I'll {action} {times.spoken(when.at, now)}.")
    arguments = {"text": text, "when": when.first.isoformat(timespec="minutes"), "rrule": when.rule}
    starting = f", starting {times.day(when.first, now).removeprefix('on ')}" if "hour" not in when.label else ""
    return Act("schedule_reminder", arguments, done=f"Okay! I'll {action} {when.label}{starting}.")


def _event_call(what: str, when: times.When, minutes: int, now: datetime) -> Act:
    summary = what[0].upper() + what[1:]
    start = when.at if isinstance(when, times.Once) else when.first
    arguments: dict[str, Any] = {
        "summary": summary,
        "start": start.isoformat(timespec="minutes"),
        "end": (start + timedelta(minutes=minutes)).isoformat(timespec="minutes"),
    }
    if isinstance(when, times.Repeating):
        arguments["rrule"] = when.rule
        said = f"{when.label}, starting {times.spoken(start, now)}"
    else:
        said = times.spoken(start, now)
    return Act("calendar_create_event", arguments, done=f"Added “{summary}” to your calendar {said}.")


# --- what it knows it cannot do -------------------------------------------------------------------------------------

_SEND_MAIL = re.compile(
    r"\b(?:send|write|reply|forward|draft|compose|answer)\b.*\b(?:e-?mails?|mail|message to)\b", re.I
)
_DELETE_EVENT = re.compile(r"^(?:delete|remove|cancel|move|reschedule)\b.*\b(?:event|meeting|appointment)s?\b", re.I)


def _known_refusal(text: str) -> Intent:
    if _SEND_MAIL.search(text):
        return Refuse("I can't write or send mail: without a language model I only list your unread mail.")
    if _DELETE_EVENT.search(text):
        return Refuse("I can't change or remove calendar events: without a language model I only list and add them.")
    return None
