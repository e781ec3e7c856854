"""Times and repetitions in the words a person reads: "Mon 30 Nov, 09:00", "every Monday at 09:00", "every
weekday at 07:30". Every text that reaches a person (a reply, a text on their phone, an approval request, the
console's Reminders page) says a time through these functions, in the person's time zone, so that no RRULE and no
ISO timestamp ever reaches them.

Dates and clock times are Babel's (the CLDR formats of ``settings.PERSON_LOCALE``, British English unless set); a
repetition is read from its RFC 5545 text with icalendar's public ``vRecur`` and said through the small tables
below. A rule these tables cannot say ("the 20th week of the year") is said as "on a repeating schedule", never as
the rule itself.
"""

from collections.abc import Sequence
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from babel import Locale
from babel.dates import format_interval, format_skeleton, format_time
from django.conf import settings
from django.utils import timezone
from icalendar import vRecur

UNSAID = "on a repeating schedule"

_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_DAY_NAMES = dict(zip(_WEEKDAYS, _NAMES, strict=True))
_WORK_WEEK = frozenset(_WEEKDAYS[:5])
_WEEKEND = frozenset(_WEEKDAYS[5:])
# What one period of each frequency is called: "every day", "every 2 weeks".
_UNITS = {"HOURLY": "hour", "DAILY": "day", "WEEKLY": "week", "MONTHLY": "month", "YEARLY": "year"}
_POSITIONS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last", -2: "second to last"}
# Parts the tables say; a rule with any other part is said as UNSAID.
_SAID_PARTS = frozenset(
    {"FREQ", "INTERVAL", "BYDAY", "BYMONTHDAY", "BYMONTH", "BYHOUR", "BYMINUTE", "BYSECOND", "COUNT", "UNTIL", "WKST"}
)


# CLDR puts thin and narrow no-break spaces in some formats ("9:00\u202fAM", around the dash of an interval); a text
# to a phone is cheaper and safer with plain spaces (one such character turns a whole SMS into UCS-2).
_PLAIN_SPACES = str.maketrans({"\u2009": " ", "\u202f": " ", "\u00a0": " "})


def _plain(text: str) -> str:
    return text.translate(_PLAIN_SPACES)


def locale() -> Locale:
    return Locale.parse(getattr(settings, "PERSON_LOCALE", "en_GB"))


def local(moment: datetime, zone: ZoneInfo | str | None = None) -> datetime:
    """The moment as a naive local time in ``zone``; a naive moment is taken as already local."""
    if moment.tzinfo is None or zone is None:
        return moment.replace(tzinfo=None)
    return moment.astimezone(ZoneInfo(zone) if isinstance(zone, str) else zone).replace(tzinfo=None)


def parse_local(text: str, zone: ZoneInfo) -> datetime | date:
    """A local ISO 8601 time in ``zone`` (one without an offset is the person's), or a date (10 characters) for an
    all-day value; ValueError if it is neither."""
    if len(text) == 10:
        return date.fromisoformat(text)
    parsed = datetime.fromisoformat(text)
    return parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed.astimezone(zone)


# --- one moment ---------------------------------------------------------------------------------------------------


def clock(moment: datetime | time, zone: ZoneInfo | str | None = None) -> str:
    """09:00 (the locale's short time: 9:00 AM in American English)."""
    if isinstance(moment, datetime):
        moment = local(moment, zone).time()
    return _plain(format_time(moment, "short", locale=locale()))


def day(moment: datetime | date, zone: ZoneInfo | str | None = None, *, now: datetime | date | None = None) -> str:
    """Mon 30 Nov; Mon, 30 Nov 2027 when it is not in the year of ``now`` (the present unless given)."""
    if isinstance(moment, datetime):
        moment = local(moment, zone).date()
    this_year = (now or timezone.now()).year == moment.year
    return _plain(format_skeleton("MMMEd" if this_year else "yMMMEd", moment, locale=locale()))


def moment(when: datetime, zone: ZoneInfo | str | None = None, *, now: datetime | None = None) -> str:
    """Mon 30 Nov, 09:00: the day and the time, joined the locale's way."""
    at = local(when, zone)
    joined = locale().datetime_formats["medium"]
    return str(joined).format(clock(at), day(at, now=local(now or timezone.now(), zone)))


def spoken(when: datetime, zone: ZoneInfo | str | None = None, *, now: datetime) -> str:
    """For a sentence: "today at 15:00", "tomorrow at 09:00", "on Mon 30 Nov at 09:00"."""
    at, present = local(when, zone), local(now, zone)
    days = (at.date() - present.date()).days
    said = {0: "today", 1: "tomorrow"}.get(days) or f"on {day(at, now=present)}"
    return f"{said} at {clock(at)}"


def span(
    start: datetime | date, end: datetime | date, zone: ZoneInfo | str | None = None, *, now: datetime | None = None
) -> str:
    """An event's time: "Fri 4 Dec, 13:00-14:00", "Fri 4 Dec, 22:00 - Sat 5 Dec, 01:00", or for whole days
    (dates, the end exclusive as in iCalendar) "Fri 4 Dec" and "Fri 4 Dec - Sun 6 Dec" (with en dashes)."""
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        first, last = _as_date(start), _as_date(end)
        if (last - first).days <= 1:
            return day(first, now=now)
        skeleton = "MMMEd" if first.year == (now or timezone.now()).year else "yMMMEd"
        return _plain(format_interval(first, date.fromordinal(last.toordinal() - 1), skeleton, locale=locale()))
    begins, ends = local(start, zone), local(end, zone)
    if begins.date() != ends.date():
        return f"{moment(begins, now=now)} – {moment(ends, now=now)}"
    hours = _plain(format_interval(begins.time(), ends.time(), "Hm", locale=locale()))
    return str(locale().datetime_formats["medium"]).format(hours, day(begins, now=now))


def _as_date(value: datetime | date) -> date:
    return value.date() if isinstance(value, datetime) else value


# --- a repetition -------------------------------------------------------------------------------------------------


def repetition(rule: str, start: datetime | None = None, *, timed: bool = True, now: datetime | None = None) -> str:
    """An RFC 5545 RRULE ("FREQ=WEEKLY;BYDAY=MO", with or without "RRULE:") in words: "every Monday at 09:00".
    ``start`` (naive local) is the first occurrence, which supplies what the rule leaves out (the day of a weekly
    rule, the time of a daily one), as RFC 5545 says it does; ``timed=False`` leaves the time out (an all-day
    event). A rule that cannot be read is said as UNSAID."""
    try:
        parts = _parts(rule)
    except ValueError:
        return UNSAID
    if str(_first(parts, "FREQ")).upper() not in _UNITS or set(parts) - _SAID_PARTS:
        return UNSAID
    try:
        said = _period(parts, start) + (_time_of_day(parts, start) if timed else "") + _end(parts, now)
    except (ValueError, KeyError, TypeError):
        return UNSAID
    return said


def _parts(rule: str) -> dict[str, list[Any]]:
    text = str(rule or "").strip().removeprefix("RRULE:")
    if not text or "\n" in text or len(text) > 500:
        raise ValueError("not one rule")
    found = vRecur.from_ical(text)
    return {str(name).upper(): list(values) for name, values in found.items()}


def _first(parts: dict[str, list[Any]], name: str, default: Any = None) -> Any:
    values = parts.get(name) or []
    return values[0] if values else default


def _period(parts: dict[str, list[Any]], start: datetime | None) -> str:
    frequency = str(_first(parts, "FREQ"))
    interval = int(_first(parts, "INTERVAL", 1))
    if interval < 1:
        raise ValueError("interval")
    weekdays = [str(value).upper() for value in parts.get("BYDAY", [])]
    if frequency == "HOURLY":
        return _every(interval, "hour") + (f" on {_days(weekdays)}" if weekdays else "")
    if frequency in ("DAILY", "WEEKLY") and (weekdays or frequency == "WEEKLY"):
        if not weekdays:
            weekdays = [_WEEKDAYS[start.weekday()]] if start is not None else []
        if not weekdays:
            return _every(interval, "week")
        return _weekly(weekdays, interval if frequency == "WEEKLY" else 1)
    if frequency == "DAILY":
        return _every(interval, "day")
    if frequency == "MONTHLY":
        return _every(interval, "month") + _in_the_month(parts, weekdays, start)
    return _every(interval, "year") + _in_the_year(parts, weekdays, start)


def _every(interval: int, unit: str) -> str:
    if interval == 1:
        return f"every {unit}"
    if interval == 2:
        return f"every other {unit}"
    return f"every {interval} {unit}s"


def _weekly(weekdays: list[str], interval: int) -> str:
    """every Monday, every weekday, every day except Friday, every other Tuesday, every 3 weeks on Monday."""
    if any(day not in _DAY_NAMES for day in weekdays):
        raise ValueError("a numbered weekday in a weekly rule")
    chosen = frozenset(weekdays)
    if interval == 1:
        if chosen == frozenset(_WEEKDAYS):
            return "every day"
        if chosen == _WORK_WEEK:
            return "every weekday"
        if chosen == _WEEKEND:
            return "every Saturday and Sunday"
        if len(chosen) == 6:
            (missing,) = frozenset(_WEEKDAYS) - chosen
            return f"every day except {_DAY_NAMES[missing]}"
        return f"every {_listed([_DAY_NAMES[day] for day in _WEEKDAYS if day in chosen])}"
    names = _listed([_DAY_NAMES[day] for day in _WEEKDAYS if day in chosen])
    return f"every other {names}" if interval == 2 else f"every {interval} weeks on {names}"


def _days(weekdays: list[str]) -> str:
    chosen = frozenset(weekdays)
    if chosen == _WORK_WEEK:
        return "weekdays"
    return _listed([f"{_DAY_NAMES[day]}s" for day in _WEEKDAYS if day in chosen])


def _in_the_month(parts: dict[str, list[Any]], weekdays: list[str], start: datetime | None) -> str:
    """on the 3rd, on the last day, on the first Monday."""
    month_days = [int(value) for value in parts.get("BYMONTHDAY", [])]
    if weekdays:
        return " on " + _listed([_numbered_weekday(day) for day in weekdays])
    if not month_days and start is not None:
        month_days = [start.day]
    if not month_days:
        return ""
    return " on " + _listed([_month_day(number) for number in month_days])


def _in_the_year(parts: dict[str, list[Any]], weekdays: list[str], start: datetime | None) -> str:
    """on 3 Mar; in March; on the last Friday of November."""
    months = [int(str(value)) for value in parts.get("BYMONTH", [])]
    month_days = [int(value) for value in parts.get("BYMONTHDAY", [])]
    if not months and start is not None and not weekdays:
        months, month_days = [start.month], month_days or [start.day]
    month_names = [str(locale().months["format"]["wide"][number]) for number in months]
    if weekdays and months:
        return " on " + _listed([_numbered_weekday(day) for day in weekdays]) + f" of {_listed(month_names)}"
    if len(months) == 1 and len(month_days) == 1 and month_days[0] > 0:
        return " on " + _plain(format_skeleton("MMMd", date(2000, months[0], month_days[0]), locale=locale()))
    if months and not month_days:
        return f" in {_listed(month_names)}"
    raise ValueError("a yearly rule the tables do not say")


def _numbered_weekday(text: str) -> str:
    """ "-1FR" → "the last Friday", "2TU" → "the second Tuesday"."""
    name, number = text[-2:], text[:-2]
    if name not in _DAY_NAMES:
        raise ValueError(text)
    if not number:
        return f"every {_DAY_NAMES[name]}"
    return f"the {_POSITIONS[int(number)]} {_DAY_NAMES[name]}"


def _month_day(number: int) -> str:
    if number == -1:
        return "the last day"
    if number < 0:
        return f"the {_ordinal(-number)} to last day"
    return f"the {_ordinal(number)}"


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"


def _time_of_day(parts: dict[str, list[Any]], start: datetime | None) -> str:
    """at 09:00, at 09:00 and 17:00; for an hourly rule, the minute past each hour."""
    minutes = [int(value) for value in parts.get("BYMINUTE", [])]
    if _first(parts, "FREQ") == "HOURLY":
        minute = minutes[0] if len(minutes) == 1 else (start.minute if start is not None else 0)
        hours = [int(value) for value in parts.get("BYHOUR", [])]
        between = f" from {clock(time(min(hours)))} to {clock(time(max(hours)))}" if hours else ""
        return (f" at {minute} minutes past" if minute else " on the hour") + between
    hours = [int(value) for value in parts.get("BYHOUR", [])] or ([start.hour] if start is not None else [])
    if not minutes and start is not None:
        minutes = [start.minute]
    if not hours:
        return ""
    return " at " + _listed([clock(time(hour, minute)) for hour in sorted(hours) for minute in sorted(minutes or [0])])


def _end(parts: dict[str, list[Any]], now: datetime | None) -> str:
    count, until = _first(parts, "COUNT"), _first(parts, "UNTIL")
    if count is not None:
        return ", once" if int(count) == 1 else f", {int(count)} times"
    if isinstance(until, (datetime, date)):
        return f", until {day(until, now=now)}"
    return ""


def _listed(items: Sequence[str]) -> str:
    """a, b and c."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# --- a schedule: one time, or a repetition with its next time -----------------------------------------------------


def schedule(
    next_at: datetime | None,
    rule: str = "",
    start: datetime | None = None,
    *,
    zone: ZoneInfo | str | None = None,
    now: datetime | None = None,
) -> str:
    """What a reminder's schedule says: "Mon 30 Nov, 09:00" for a one-off; "every Monday at 09:00 (next: Mon 30
    Nov, 09:00)" for a repeating one. ``next_at``: its next time (aware, or naive local); ``start``: its first
    (naive local)."""
    if not rule:
        return moment(next_at, zone, now=now) if next_at is not None else "done"
    said = repetition(rule, start or (local(next_at, zone) if next_at is not None else None), now=now)
    return f"{said} (next: {moment(next_at, zone, now=now)})" if next_at is not None else said
