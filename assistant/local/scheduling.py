"""A reminder or a calendar event, drafted from a request, becomes a call once its time is read (times.py); a time
that is missing or unclear is asked about, the question ending so that a time alone answers it."""

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from assistant.local import times
from assistant.local.meaning import Act, Ask, Intent, Refuse
from assistant.local.phrases import LEAD, yours

# Every question about a time ends so: the person's next message, when it is only a time, answers it.
ANSWER_HINT = "(Just reply with the time.)"
NO_CALENDAR = "No calendar is connected: add one under Connections, then ask me again."


@dataclass(frozen=True, slots=True)
class Draft:
    """A request that needs a time: a reminder or a calendar event, before the time is read."""

    kind: str  # "reminder" or "event"
    what: str
    when: str = ""
    connector: str = "to"  # remind you to / about / that …
    minutes: int = 60  # an event's length
    notice: bool = False  # "Reminder: …": a notice unless its time reads whole
    report: str = ""  # what the message reported before the request: the reminder's words when it names none


def answered(draft: Draft, answer: str, now: datetime) -> Draft:
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


def scheduled(draft: Draft, now: datetime, tools: Collection[str]) -> Intent:
    """The call ``draft`` makes once its time is read, or what to ask or refuse first."""
    about = "schedule_reminder" if draft.kind == "reminder" else "calendar_create_event"
    if draft.kind == "event" and about not in tools:
        return Refuse(NO_CALENDAR, about)
    what = draft.what.strip(" ,") or _shortened(draft.report) or ("alarm" if draft.connector == "alarm" else "")
    if not what:
        question = "What should I remind you of?" if draft.kind == "reminder" else "What should I call the event?"
        return Ask(question, about)
    action = _action(draft, what)
    try:
        when = times.read(draft.when, now) if draft.when else None
    except times.Unclear as unclear:
        return _asked(draft, f"{unclear.question.format(action=action)} {ANSWER_HINT}", about)
    except times.Impossible as impossible:
        return Refuse(str(impossible), about)
    if when is None:
        return _asked(draft, f"When should I {action}? {ANSWER_HINT}", about)
    if draft.kind == "event":
        return _event_call(what, when, draft.minutes, now)
    return _reminder_call(what, when, action, now)


def _asked(draft: Draft, question: str, about: str) -> Ask | None:
    """The question about the draft's time; a notice ("Reminder: your invoice is due on Friday") tells, it does not
    ask."""
    return None if draft.notice else Ask(question, about)


_REPORT_LIMIT = 120


def _shortened(report: str) -> str:
    """A report as a reminder's words: "remind me at 9" after "The nightly backup failed on db-1"."""
    report = report.strip(" ,:;-")
    if len(report) <= _REPORT_LIMIT:
        return report
    return report[:_REPORT_LIMIT].rsplit(" ", 1)[0] + "…"


def _action(draft: Draft, what: str) -> str:
    if draft.connector == "alarm":
        return "ring your alarm" if what.lower() == "alarm" else f"ring your alarm for {yours(what)}"
    if draft.kind == "event":
        return f"put “{what[:1].upper()}{what[1:]}” in your calendar"
    if draft.connector == "of":  # the person's own words, which may be a noun or a verb: said back as a quote
        return f"remind you of “{yours(what)}”"
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
