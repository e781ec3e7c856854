"""Alarms and wake-ups: "wake me up at 7", "set an alarm for 6 tomorrow morning"; each is a reminder at that time."""

import re

from assistant.local import times
from assistant.local.phrases import caseless, split_when
from assistant.local.scheduling import Draft

_WAKE = caseless(
    r"^(?:wake me(?: up)?|get me up|(?:i (?:need|want|have) to|make sure i) (?:get|wake) up|"
    r"send me a wake[- ]?up (?:call|alert))\b\s*(.*)$"
)
_ALARM_NOUN = r"(?:alarm(?: clock)?|wake[- ]?up(?: call| alarm| alert)?|alert)"
_SET_ALARM = caseless(
    r"^(?:(?:set|create|make|add|put|schedule|set up|start|program|give me|i (?:want|need)|turn on)(?: me)?(?: up)?\s+"
    rf"(?:an?\s+|my\s+|the\s+|one\s+)?(?:new\s+)?{_ALARM_NOUN}s?|(?:alarm|wake[- ]?up(?: call)?)(?=\s+(?:for|at)\b))"
    r"\b\s*(.*)$"
)
_ALARM_LEAD = caseless(r"^(?:on\s+)?(?:(?:that\s+|to\s+)?(?:go(?:es)? off|ring|wake me(?: up)?|get me up)\s+)?")
_HOUR_WORDS = r"(?:\d|noon|midnight|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|half|quarter)"


def _at_hour(when: str) -> str:
    """ "for 6 tomorrow", "6 am": an alarm's or a wake-up's time said without "at"."""
    return re.sub(rf"^(?:(?:for|at|by)\s+)?(?={_HOUR_WORDS})", "at ", when.strip(), flags=re.I) if when else when


def _in_the_morning(when: str) -> str:
    """Waking up is in the morning: "get me up at 6" is 06:00, not asked about."""
    if times.has_bare_hour(when) and not re.search(
        r"\b(?:[ap]\.?m|morning|afternoon|evening|night|tonight)\b", when, re.I
    ):
        return f"{when} in the morning"
    return when


def _alarm(rest: str) -> Draft:
    """ "set an alarm for 7am", "put an alarm on for 6 tomorrow morning", "set an alarm for the meeting at 7"."""
    rest = _ALARM_LEAD.sub("", rest.strip())
    name, when = split_when(_at_hour(rest))
    name = re.sub(r"^(?:for|to|at|called|named)\b\s*", "", name.strip(), flags=re.I)
    if when and not split_when(rest)[1]:
        name = ""  # the time was the rest: "for 6"
    return Draft("reminder", name, when, "alarm")


def alarm(text: str) -> Draft | None:
    """The reminder a wake-up or an alarm asks for; None when ``text`` asks for neither."""
    woken = _WAKE.match(text)
    if woken is not None:
        return Draft("reminder", "wake up", _in_the_morning(_at_hour(woken[1])), "to")
    alarm = _SET_ALARM.match(text)
    if alarm is not None:
        return _alarm(alarm[1])
    return None
