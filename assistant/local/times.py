"""Times as people write them, read in their time zone: dates.py reads dates and times ("tomorrow at noon", "in 20
minutes", "Friday at 1pm", "six thirty am"), dateparser what dates.py does not know ("next week"), dateutil's rrule
makes and serialises the recurrence ("every weekday at 9"). What is here is only the grammar around those calls:
which words repeat, which hour a bare "at 9" means, and when to ask.

A bare hour (no am/pm, no minutes on the 24-hour clock) is read so: 7 to 11 in the morning, 12 at noon, 13 to 23 and
0 on the 24-hour clock, and 1 to 6 asked about ("3am or 3pm?"), unless the phrase says morning, afternoon, evening
or tonight. A date without a time ("next Friday", "tomorrow") is asked about, never guessed.
"""

import re
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dateutil import rrule

from accounts import words
from assistant.local import dates

# dateparser keeps state between calls in places (its issues #441, #813), and the delivery engine runs many
# attempts at once: one parse at a time, a few milliseconds each.
_PARSING = threading.Lock()

WEEKDAYS = {
    "monday": rrule.MO, "tuesday": rrule.TU, "wednesday": rrule.WE, "thursday": rrule.TH, "friday": rrule.FR,
    "saturday": rrule.SA, "sunday": rrule.SU,
}  # fmt: skip
_DAY = r"(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day)?s?|tuesdays?|wednesdays?|thursdays?|saturdays?"
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10, "twelve": 12, "other": 2}
_COUNT = r"(?:\d{1,3}|one|two|three|four|five|six|ten|twelve|other)"


class Unclear(Exception):
    """The phrase does not say enough to act on; ``question`` is what to ask back, with "{action}" where the caller
    says what it would do ("remind you to stretch")."""

    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class Impossible(Exception):
    """The phrase says a time the assistant will not schedule; the text says why."""


@dataclass(frozen=True, slots=True)
class Once:
    at: datetime  # naive, local to the person's zone


@dataclass(frozen=True, slots=True)
class Repeating:
    first: datetime  # naive local time of the first occurrence
    rule: str  # an RFC 5545 RRULE without its "RRULE:" prefix, e.g. FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR
    label: str  # how the person would say it: "every weekday"


When = Once | Repeating


# --- saying times back ------------------------------------------------------------------------------------------


def clock(moment: datetime) -> str:
    """09:00, in the person's locale (accounts/words.py)."""
    return words.clock(moment)


def day(moment: datetime, now: datetime) -> str:
    """today, tomorrow, on Mon 30 Nov."""
    return words.spoken(moment, now=now).rsplit(" at ", 1)[0]


def spoken(moment: datetime, now: datetime) -> str:
    """today at 15:00, tomorrow at 09:00, on Mon 30 Nov at 09:00."""
    return words.spoken(moment, now=now)


# --- reading ----------------------------------------------------------------------------------------------------


def read(phrase: str, now: datetime) -> When:
    """A one-off or repeating time from a phrase such as "tomorrow at noon" or "every Monday at 8am". ``now`` is the
    person's local time, naive. Raises Unclear (ask back) or Impossible (refuse)."""
    phrase = _normalized(phrase)
    repeating = _repetition(phrase, now)
    if repeating is not None:
        return repeating
    return Once(_once(phrase, now))


def _normalized(phrase: str) -> str:
    phrase = " ".join(phrase.lower().replace("’", "'").split())
    phrase = re.sub(r"\bhalf an hour\b", "30 minutes", phrase)
    phrase = re.sub(r"\ba quarter of an hour\b", "15 minutes", phrase)
    phrase = re.sub(r"\b(?:this )?coming\b", "", phrase)
    phrase = dates.digits(phrase)
    phrase = re.sub(r"\b(\d{1,2})\s*([ap])\.m\.?", r"\1\2m", phrase)
    phrase = re.sub(r"\bo'?clock\b|\bsharp\b", "", phrase)
    phrase = re.sub(r"\b(?:around|about|approximately)\b", "at", phrase)
    return " ".join(phrase.split())


def _once(phrase: str, now: datetime) -> datetime:
    resolved = _bare_hours(phrase)
    parsed, period = _parse(resolved, now)
    if parsed is None:
        raise Unclear("When should I {action}? I could not read the time.")
    if period in ("week", "month", "year"):
        raise Unclear("On which day, and at what time, should I {action}?")
    if period == "day":
        raise Unclear(f"What time {day(parsed, now)} should I {{action}}?")
    if parsed > now + timedelta(days=3 * 366):
        raise Impossible("That is more than three years away.")
    moment = parsed.replace(second=0, microsecond=0)
    if moment < now.replace(second=0, microsecond=0):
        raise Impossible(f"That time has passed: it is {clock(now)} {day(now, now)} where you are.")
    return moment


def day_named(phrase: str, now: datetime) -> datetime | None:
    """The day a phrase such as "Friday" or "December 3" names (midnight, local), or None."""
    parsed, period = _parse(_normalized(phrase), now)
    if parsed is None or period not in ("day", "time", "part_of_day"):
        return None
    return parsed.replace(hour=0, minute=0, second=0, microsecond=0)


def _parse(phrase: str, now: datetime) -> tuple[datetime | None, str]:
    found = dates.read(phrase, now)
    if found is not None:
        return found
    return with_dateparser(phrase, now)


def with_dateparser(phrase: str, now: datetime) -> tuple[datetime | None, str]:
    """What dates.py does not know ("next week", "3/15"), read by dateparser."""
    settings = {
        # dateparser calls a time equal to the base's time of day a "day" ("tomorrow at 10am" at 10:00 sharp): a
        # base a microsecond off a round minute never equals a time someone wrote.
        "RELATIVE_BASE": now.replace(microsecond=now.microsecond or 1),
        "PREFER_DATES_FROM": "future",
        "RETURN_AS_TIMEZONE_AWARE": False,
        "RETURN_TIME_AS_PERIOD": True,
    }
    # Imported here: dateparser takes over half a second to load, which only a process that reads times should pay.
    from dateparser.date import DateDataParser

    with _PARSING:
        found: Any = DateDataParser(languages=["en"], settings=settings).get_date_data(phrase)
    return found.date_obj, found.period or "day"


_BARE_HOUR = re.compile(r"\b(at|@|around|by)\s+(\d{1,2})(?:[:.](\d{2}))?(?!\s*(?:[ap]m\b|[:./\d]))")
_EVENING = re.compile(r"\b(afternoon|evening|tonight|night)\b")
_MORNING = re.compile(r"\bmorning\b")


def _bare_hours(phrase: str, context: str = "") -> str:
    """ "at 9" as "at 09:00", "at 8 tonight" as "at 20:00 tonight"; "at 3" alone is asked about. ``context``: the
    whole phrase, when ``phrase`` is only a part of it ("every evening" said elsewhere)."""
    context = context or phrase

    def hour_of(match: re.Match[str]) -> str:
        hour, minute = int(match[2]), int(match[3] or 0)
        if hour > 23 or minute > 59 or match[2].startswith("0"):  # "at 05:00" is the 24-hour clock
            return match[0]
        if 1 <= hour <= 11 and _EVENING.search(context):
            hour += 12
        elif 1 <= hour <= 6 and not _MORNING.search(context):
            raise Unclear(f"Did you mean {hour}{_minutes(minute)}am or {hour}{_minutes(minute)}pm?")
        return f"{match[1]} {hour:02d}:{minute:02d}"

    return _without_day_parts(_BARE_HOUR.sub(hour_of, phrase))


def _without_day_parts(phrase: str) -> str:
    """Once the clock time is known, "in the evening" only repeats it, and dateparser reads the pair as neither."""
    if not re.search(r"\d(?::\d\d)?\s?(?:am|pm)\b|\d:\d\d", phrase):
        return phrase
    phrase = re.sub(r"\bin the (?:morning|afternoon|evening)\b|\bat night\b", "", phrase)
    phrase = re.sub(r"\bthis (?:morning|afternoon|evening)\b", "today", phrase)
    phrase = re.sub(r"\b(tomorrow|today) (?:morning|afternoon|evening|night)\b", r"\1", phrase)
    return " ".join(phrase.split())


def _minutes(minute: int) -> str:
    return f":{minute:02d}" if minute else ""


def has_bare_hour(phrase: str) -> bool:
    return _BARE_HOUR.search(_normalized(phrase)) is not None


def with_meridiem(phrase: str, meridiem: str) -> str:
    """The phrase with "am" or "pm" after its bare hour: the person's answer to "3am or 3pm?"."""
    phrase = _normalized(phrase)
    return _BARE_HOUR.sub(lambda match: f"{match[0]}{meridiem}", phrase, count=1)


def without_bare_hour(phrase: str) -> str:
    return " ".join(_BARE_HOUR.sub("", _normalized(phrase)).split())


# --- repetition ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pattern:
    frequency: int
    interval: int = 1
    weekdays: tuple[rrule.weekday, ...] = ()
    label: str = ""


_SCHOOL_WEEK = (rrule.MO, rrule.TU, rrule.WE, rrule.TH, rrule.FR)
_REPEATS: list[tuple[re.Pattern[str], Any]] = [
    (re.compile(rf"\bevery {_COUNT} (?:minutes?|mins?|seconds?|secs?)\b|\bevery (?:minute|second)\b"), None),
    (
        re.compile(r"\b(?:every|each) (?:week ?day|work ?day|business day)s?\b|\b(?:on )?weekdays\b"),
        _Pattern(rrule.WEEKLY, weekdays=_SCHOOL_WEEK, label="every weekday"),
    ),
    (
        re.compile(r"\b(?:every|each) weekend(?: day)?s?\b|\b(?:on )?weekends\b"),
        _Pattern(rrule.WEEKLY, weekdays=(rrule.SA, rrule.SU), label="every weekend day"),
    ),
    (
        re.compile(r"\b(?:every|each) (?:day|morning|afternoon|evening|night)\b|\bdaily\b|\beveryday\b|\bnightly\b"),
        _Pattern(rrule.DAILY, label="every day"),
    ),
    (re.compile(r"\b(?:every|each) hour\b|\bhourly\b"), _Pattern(rrule.HOURLY, label="every hour")),
    (re.compile(r"\b(?:every|each) week\b|\bweekly\b"), _Pattern(rrule.WEEKLY, label="every week")),
    (re.compile(r"\b(?:every|each) month\b|\bmonthly\b"), _Pattern(rrule.MONTHLY, label="every month")),
    (re.compile(r"\b(?:every|each) year\b|\byearly\b|\bannually\b"), _Pattern(rrule.YEARLY, label="every year")),
]
_EVERY_N = re.compile(rf"\bevery ({_COUNT}) (hour|day|week|month)s?\b")
_EVERY_DAYS = re.compile(rf"\b(?:every|each|on) ((?:{_DAY})(?:(?:,| and| &|, and) (?:{_DAY}))*)\b")
_FREQUENCIES = {"hour": rrule.HOURLY, "day": rrule.DAILY, "week": rrule.WEEKLY, "month": rrule.MONTHLY}
_MONTH_DAY = re.compile(r"\b(?:on )?the (\d{1,2})(?:st|nd|rd|th)?\b")


def _repetition(phrase: str, now: datetime) -> Repeating | None:
    phrase, excluded = _exceptions(phrase)
    found = _pattern(phrase)
    if found is None:
        if excluded:
            raise Impossible("“Except” goes with a repetition, such as “every day at 9 except Friday”.")
        return None
    pattern, rest = found
    if excluded:
        pattern = _without(pattern, excluded)
    if pattern.frequency == rrule.HOURLY:
        first = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        return _repeating(pattern, first, {}, now)
    extra: dict[str, Any] = {}
    if pattern.frequency == rrule.MONTHLY:
        month_day = _MONTH_DAY.search(rest)
        if month_day is not None and 1 <= int(month_day[1]) <= 31:
            extra["bymonthday"] = int(month_day[1])
            rest = _MONTH_DAY.sub("", rest, count=1)
    if pattern.frequency == rrule.WEEKLY and not pattern.weekdays:
        named = _weekdays(rest)
        if named:
            pattern = _Pattern(rrule.WEEKLY, pattern.interval, named, _weekday_label(named, pattern.interval))
    at = _time_of_day(rest, phrase, now, pattern.label)
    first = now.replace(hour=at.hour, minute=at.minute, second=0, microsecond=0)
    if pattern.frequency == rrule.YEARLY:
        first = at  # "every year on March 3 at 9am": the day as well as the time
    return _repeating(pattern, first, extra, now)


_EXCEPT = re.compile(rf"\b(?:except(?: on)?|but not(?: on)?) ((?:{_DAY})(?:(?:,| and| or|, and|, or) (?:{_DAY}))*)\b")
_WEEK = (rrule.MO, rrule.TU, rrule.WE, rrule.TH, rrule.FR, rrule.SA, rrule.SU)


def _exceptions(phrase: str) -> tuple[str, tuple[rrule.weekday, ...]]:
    found = _EXCEPT.search(phrase)
    if found is None:
        return phrase, ()
    return _cut(phrase, found), _weekdays(found[1])


def _without(pattern: _Pattern, excluded: tuple[rrule.weekday, ...]) -> _Pattern:
    """ "every day except Sunday", "every weekday but not Friday": the days that remain, weekly."""
    if pattern.frequency not in (rrule.DAILY, rrule.WEEKLY) or pattern.interval != 1:
        raise Impossible("“Except” works with days of the week, such as “every weekday at 9 except Friday”.")
    days = tuple(day for day in (pattern.weekdays or _WEEK) if day not in excluded)
    if not days:
        raise Impossible("That leaves no day to remind you on.")
    names = [name.capitalize() for name, weekday in WEEKDAYS.items() if weekday in excluded]
    return _Pattern(rrule.WEEKLY, weekdays=days, label=f"{pattern.label} except {' and '.join(names)}")


def _pattern(phrase: str) -> tuple[_Pattern, str] | None:
    counted = _EVERY_N.search(phrase)
    if counted is not None:
        interval = _count(counted[1])
        if interval < 1 or interval > 365:
            raise Impossible("Choose a repetition between every hour and every year.")
        unit = counted[2]
        label = f"every {interval} {unit}s" if interval > 1 else f"every {unit}"
        return _Pattern(_FREQUENCIES[unit], interval, label=label), _cut(phrase, counted)
    for expression, pattern in _REPEATS:
        match = expression.search(phrase)
        if match is None:
            continue
        if pattern is None:
            raise Impossible("Reminders repeat at most every hour.")
        return pattern, _cut(phrase, match)
    days = _EVERY_DAYS.search(phrase)
    if days is not None and (days[0].startswith(("every", "each")) or days[1].rstrip().endswith("s")):
        named = _weekdays(days[1])
        return _Pattern(rrule.WEEKLY, weekdays=named, label=_weekday_label(named, 1)), _cut(phrase, days)
    return None


def _cut(phrase: str, match: re.Match[str]) -> str:
    return " ".join((phrase[: match.start()] + " " + phrase[match.end() :]).split())


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _weekdays(text: str) -> tuple[rrule.weekday, ...]:
    found = []
    for word in re.findall(r"[a-z]+", text):
        for name, weekday in WEEKDAYS.items():
            stem = word.rstrip("s") if word not in ("tues", "thurs") else word
            if len(stem) >= 3 and name.startswith(stem) and weekday not in found:
                found.append(weekday)
    return tuple(found)


def _weekday_label(weekdays: tuple[rrule.weekday, ...], interval: int) -> str:
    names = [name.capitalize() for name, weekday in WEEKDAYS.items() if weekday in weekdays]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"every other {listed}" if interval == 2 else f"every {listed}"


def _time_of_day(rest: str, phrase: str, now: datetime, label: str) -> datetime:
    rest = re.sub(r"\b(?:on|every|each|starting|from)\b", " ", rest)
    if not re.search(r"\d|noon|midnight", rest):
        raise Unclear(f"What time {label} should I {{action}}?")
    resolved = _bare_hours(rest, context=phrase)
    parsed, period = _parse(resolved, now)
    if parsed is None or period not in ("time", "part_of_day"):
        raise Unclear(f"What time {label} should I {{action}}?")
    return parsed


def _repeating(pattern: _Pattern, start: datetime, extra: dict[str, Any], now: datetime) -> Repeating:
    kwargs: dict[str, Any] = dict(extra)
    if pattern.weekdays:
        kwargs["byweekday"] = pattern.weekdays
    # The first occurrence is the next one from now ("every other day at 8" starts tomorrow at 8 if today's 8 has
    # passed); the interval counts from there.
    first = rrule.rrule(pattern.frequency, dtstart=start, **kwargs).after(now - timedelta(seconds=1), inc=False)
    if first is None:
        raise Impossible("That repetition never happens.")
    rule = rrule.rrule(pattern.frequency, dtstart=first, interval=pattern.interval, **kwargs)
    text = str(rule).split("RRULE:", 1)[1]  # dateutil writes "DTSTART:…\nRRULE:…"; the start goes separately
    return Repeating(first=first, rule=text, label=words.repetition(text, first))
