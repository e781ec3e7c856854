"""Reminders: "remind me to stretch at 3pm" (a draft until its time is read: scheduling.py), "what reminders do I
have", "cancel the stretch reminder"."""

import re
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from assistant.local.alarms import alarm
from assistant.local.meaning import Act, CancelNamed, Intent
from assistant.local.phrases import NOT_A_NAME, caseless, is_question_tail, is_time_phrase, is_time_word, split_when
from assistant.local.scheduling import Draft

_REMIND = caseless(
    r"^(?:remind me|remind(?= to\b)|(?:don't|do not) let me forget|"
    r"(?:set|add|create|make|schedule|send|set up|give me|i need|i want|i would like|i'd like|can i set|can you set|"
    r"how about|open up)(?: me)? (?:a |an )?(?:new )?reminder(?! e-?mail)(?: set| made)?|new reminder|"
    r"(?:be|get) reminded|"
    r"reminder(?=:| to\b))\b:?\s*(.*)$"
)
# "remind me what the webhook's address is" asks for something now: a question, not a reminder.
_REMIND_QUESTION = caseless(r"^remind me (?:what|how|who|where|why|which|whether|if)\b")

_WHEN_FIRST = caseless(r"^(.+?),?\s+remind me\b\s*(.*)$")
_CONNECTOR = caseless(r"^(to|about|that|of|for)\s+(.*)$")
_INNER_CONNECTOR = caseless(r"\s(to|about|that)\s")


def reminder(text: str) -> Draft | None:
    """The reminder ``text`` asks for (an alarm or a wake-up is one), its time not yet read; None: it asks for none."""
    first = _WHEN_FIRST.match(text)
    if first is not None and is_time_phrase(first[1].split()):
        connector, what = _connected(first[2])
        return _both_times(Draft("reminder", what, first[1], connector))
    return alarm(text) or _remind(text)


def _remind(text: str) -> Draft | None:
    found = _REMIND.match(text)
    if found is None or _REMIND_QUESTION.match(text):
        return None
    rest = found[1]
    connected = _CONNECTOR.match(rest)
    if connected is not None and connected[1].lower() == "for":
        rest = connected[2]  # "a reminder for 3pm to stretch", "a reminder for the dentist at 3pm"
    for inner in _INNER_CONNECTOR.finditer(rest):  # "remind me at 3pm to stretch"
        if is_time_phrase(rest[: inner.start()].split()):
            return _both_times(Draft("reminder", rest[inner.end() :], rest[: inner.start()], inner[1].lower()))
    connector, body = _connected(rest)
    what, when = split_when(body)
    notice = bool(re.match(r"^reminder\b", text, re.I))
    if notice and not when:
        return None  # "Reminder: your invoice is due" is a notice; "Reminder: pay it on Friday at 9am" a request
    if connector == "of" and not when and re.match(r"^remind me of\b", text, re.I):
        return None  # "remind me of the date of my last paycheck" asks for something now
    return Draft("reminder", what, when, connector, notice=notice)


def _both_times(draft: Draft) -> Draft:
    """ "remind me each Friday to submit the timesheet at 4pm": the time said before the text and the one after."""
    what, after = split_when(draft.what)
    return replace(draft, what=what, when=f"{draft.when} {after}") if after else draft


def _connected(text: str) -> tuple[str, str]:
    found = _CONNECTOR.match(text)
    if found is None:
        return "of", text  # "set a reminder: team standup at 9:15", "reminder: take the meds at 9pm": quoted
    return ("about" if found[1].lower() == "for" else found[1].lower()), found[2]


_SOME = r"(?:(?:all|any|all of|my|the|upcoming|active|scheduled|current|pending|open|of)\s+)*"
_WHEN_ASKED = r"(?:\s+(?:today|tomorrow|this week|for (?:today|tomorrow|this week)|set|scheduled|coming up|left|now))?"
_LIST_REMINDERS = caseless(
    rf"^(?:(?:show|list|see|view|get|check|display|tell me|give me|read)\s+(?:me\s+)?{_SOME}reminders{_WHEN_ASKED}"
    rf"|(?:what|which)(?: are| 're)?\s+{_SOME}reminders(?:\s+(?:do i have|have i got|are there|are (?:set|scheduled|"
    rf"active|left|coming up)|did (?:i|you) set))?{_WHEN_ASKED}"
    rf"|what(?:'s| is| are)\s+(?:on\s+)?my\s+reminders?(?:\s+list)?"
    rf"|(?:do i have|have i got|are there|is there)\s+{_SOME}(?:reminders?|anything to remember){_WHEN_ASKED}"
    rf"|{_SOME}reminders{_WHEN_ASKED})$"
)


_ALARMS = r"(?:alarms?|alerts?|reminders?|wake[- ]?up(?: alarms?| calls?| times?)?)"
# A question about the person's alarms or reminders, then at most a few words of when ("set for tomorrow morning").
_ASK_ALARMS = caseless(
    rf"^(?:(?:what|which|how many|any)\s+(?:\w+\s+)?{_ALARMS}(?:\s+(?:do|did|have|are|is|i|you))?"
    rf"|(?:show|list|tell me|read|check|see|give me|display|view|review|let me see|let me know)\s+(?:me\s+)?"
    rf"(?:about\s+)?{_SOME}(?:set\s+|\w+\s+)?{_ALARMS}"
    rf"|(?:do i have|have i got|are there|is there|is|are)\s+(?:(?:any|an?|my|all|the)\s+(?:\w+\s+)?)?{_ALARMS}"
    rf"|what(?: is|'s| are) (?:on )?(?:my|the) (?:next |\w+ )?{_ALARMS}(?: list)?"
    rf"|what(?: is|'s) on my list of reminders"
    rf"|(?:at )?what times? (?:is|are|will|does|do|have you set) (?:my|the) (?:\w+\s+)?{_ALARMS}"
    rf"|when (?:is|are) my (?:next )?{_ALARMS}|(?:have i|did you|did i) set (?:any |an |my |the )?{_ALARMS}"
    rf"|(?:show|give|tell) me the list of {_ALARMS}|my (?:set |current )?{_ALARMS}"
    rf"|what {_ALARMS} will (?:wake|go off)|what time is set for my (?:\w+ )?{_ALARMS})(?P<tail>(?:\s+\S+){{0,8}})$"
)


def list_reminders(text: str, now: datetime, tools: Collection[str]) -> Intent:
    asked = _ASK_ALARMS.match(text)
    about_alarms = asked is not None and is_question_tail(asked["tail"]) and not re.search(r"\bemails?\b", text, re.I)
    return Act("list_reminders", {}) if _LIST_REMINDERS.match(text) or about_alarms else None


# The reminder is the verb's object: "cancel the stretch reminder", "delete my reminder to call Sam", never a word
# further on ("clear my head before the reminder fires").
_CANCEL = caseless(
    r"^(?:cancel|delete|remove|stop|clear|drop|forget|forget about|turn off|switch off|disable|deactivate|unset|"
    r"silence|unschedule|get rid of|i (?:don't|do not|no longer) need)\s+"
    rf"((?:(?:the|my|that|this|these|those|all|every|each|of|any)\s+)*(?:{NOT_A_NAME}[\w':.-]+\s+){{0,3}}"
    r"(?:reminders?|alarms?|wake[- ]?up(?: calls?| alarms?)?)\b.*"
    r"|rem_[A-Za-z0-9]+)$"
)
_STOP_REMINDING = caseless(r"^(?:stop|don't|do not|no more|quit)\s+remind(?:ing)?\s+me\s+(?:to|about|of)\s+(.+)$")
_FILLER = {"the", "my", "a", "an", "reminder", "reminders", "to", "about", "for", "that", "of", "called", "named", "me"}


def cancel(text: str, now: datetime, tools: Collection[str]) -> Intent:
    found = _CANCEL.match(text) or _STOP_REMINDING.match(text)
    if found is None:
        return None
    named, _ = split_when(found[1])
    reminder_id = re.search(r"\brem_[A-Za-z0-9]+", named)
    if reminder_id is not None:
        return CancelNamed(reminder_id[0])
    return CancelNamed(" ".join(_naming(named)))


def _naming(named: str) -> list[str]:
    """The words that name the reminder to cancel; none: which one is asked."""
    words = [word for word in re.findall(r"[\w'-]+", named.lower()) if word not in _FILLER]
    if words and all(word in {"all", "every", "them", "each", "any"} for word in words):
        words = []  # "cancel all my reminders": one at a time, asked by name
    if re.search(r"\b(?:alarms?|wake[- ]?up)\b", named, re.I):
        # "cancel my 6am alarm": the alarm's time is not in its words; the alarms are asked about by name
        words = [word for word in words if not is_time_word(word) and word not in _ALARM_FILLER] or [
            "wake" if "wake" in named.lower() else "alarm"
        ]
    return words


_ALARM_FILLER = {"alarm", "alarms", "wake", "up", "wake-up", "calls", "call", "set", "for", "which", "i", "any", "if"}
