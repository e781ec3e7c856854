"""Reading a reminder's time and rule: occurrences in the person's time zone, as UTC instants."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

from dateutil import rrule as dateutil_rrule
from icalendar import vRecur

from reminders.models import Reminder

_TOO_FREQUENT = {"SECONDLY", "MINUTELY"}
MIN_INTERVAL = timedelta(hours=1)
_CHECKED_OCCURRENCES = 12  # the real gaps measured over the first ones, a backstop to the reasoning in parse_rule
# Parts that can select no date for thousands of years (dateutil then searches up to the year 9999: seconds to
# minutes of a worker's CPU per occurrence) and that reminders do not need. The others are checked below.
_UNSUPPORTED_PARTS = ("BYYEARDAY", "BYWEEKNO", "BYSETPOS", "BYEASTER")
_LONGEST_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


class ReminderRefused(ValueError):
    """The reminder cannot be scheduled as asked; the text says why (it goes back to the model)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    starts_local: datetime  # naive, in the zone
    zone: ZoneInfo
    rule: dateutil_rrule.rrule | None


def parse_local(when: str, zone: ZoneInfo) -> datetime:
    try:
        moment = datetime.fromisoformat(when.strip())
    except (ValueError, AttributeError):
        raise ReminderRefused(
            f"'{str(when)[:40]}' is not a date and time; use ISO 8601 local time such as 2026-11-24T15:00."
        ) from None
    if moment.tzinfo is not None:  # an explicit offset wins; the reminder still repeats in the person's zone
        moment = moment.astimezone(zone).replace(tzinfo=None)
    return moment.replace(second=0, microsecond=0)


def parse_rule(text: str, starts_local: datetime) -> dateutil_rrule.rrule:
    text = text.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    if len(text) > 500 or "\n" in text:
        raise ReminderRefused("The RRULE is too long or has line breaks; send one rule such as FREQ=DAILY;BYHOUR=9.")
    try:
        rule = dateutil_rrule.rrulestr(text, dtstart=starts_local)
    except (ValueError, TypeError, KeyError):
        raise ReminderRefused(f"'{text[:80]}' is not an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO.") from None
    if not isinstance(rule, dateutil_rrule.rrule):
        raise ReminderRefused("Send a single RRULE, not a set of rules.")
    parts = _parts(text)
    if _first(parts, "FREQ") in _TOO_FREQUENT:
        raise ReminderRefused("Reminders repeat at most hourly; use FREQ=HOURLY or a longer period.")
    for part in _UNSUPPORTED_PARTS:
        if parts.get(part):
            raise ReminderRefused(f"{part} is not supported in reminders; use BYMONTH, BYMONTHDAY, BYDAY and BYHOUR.")
    # Two minutes (or seconds) in one rule put two occurrences in the same hour, whatever FREQ says; with one of
    # each, occurrences fall in different hours at the same minute, so at least an hour apart.
    if len(parts.get("BYMINUTE", ())) > 1 or len(parts.get("BYSECOND", ())) > 1:
        raise _too_frequent()
    if not _falls_on_a_date(parts, starts_local):
        raise ReminderRefused(
            "The RRULE never falls on a date: none of its BYMONTHDAY days exists in its months (30 February, "
            "31 April...)."
        )
    _check_gaps(rule)
    return rule


def _parts(text: str) -> dict[str, list[Any]]:
    """The rule's parts by name, read with icalendar's public vRecur (dateutil keeps its own only in private
    attributes): {"FREQ": ["WEEKLY"], "BYDAY": ["MO"]}."""
    try:
        found = vRecur.from_ical(text)
    except (ValueError, TypeError, KeyError):
        raise ReminderRefused(f"'{text[:80]}' is not an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=MO.") from None
    return {str(name).upper(): list(values) for name, values in found.items()}


def _first(parts: dict[str, list[Any]], name: str) -> str:
    values = parts.get(name) or [""]
    return str(values[0]).upper()


def _too_frequent() -> ReminderRefused:
    return ReminderRefused(
        "Reminders repeat at most hourly: the RRULE puts two occurrences less than an hour apart (several BYMINUTE "
        "or BYSECOND values); use one minute, e.g. FREQ=HOURLY;BYMINUTE=0."
    )


def _falls_on_a_date(parts: dict[str, list[Any]], starts_local: datetime) -> bool:
    """Whether some month of the rule has one of its days of the month (any year; 29 February counts). A monthly or
    yearly rule that names no day takes the start's day, and a yearly one the start's month too (RFC 5545 3.3.10)."""
    days = [int(day) for day in parts.get("BYMONTHDAY", ())]
    months = [int(month) for month in parts.get("BYMONTH", ())]
    frequency = _first(parts, "FREQ")
    if not days and frequency in ("MONTHLY", "YEARLY") and not parts.get("BYDAY"):
        days = [starts_local.day]
        if frequency == "YEARLY" and not months:
            months = [starts_local.month]
    if not days:
        return True
    return any(abs(day) <= _LONGEST_MONTH.get(month, 0) for month in months or _LONGEST_MONTH for day in days)


def _check_gaps(rule: dateutil_rrule.rrule) -> None:
    previous = None
    for occurrence in islice(rule, _CHECKED_OCCURRENCES):
        if previous is not None and occurrence - previous < MIN_INTERVAL:
            raise _too_frequent()
        previous = occurrence


def next_occurrence(schedule: Schedule, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` (aware), as an aware UTC time; None when the rule has ended.
    Local times that do not exist (a DST gap) or exist twice are resolved by zoneinfo (fold=0)."""
    after_local = after.astimezone(schedule.zone).replace(tzinfo=None)
    if schedule.rule is None:
        local = schedule.starts_local if schedule.starts_local > after_local else None
    else:
        local = schedule.rule.after(after_local, inc=False)
    if local is None:
        return None
    return local.replace(tzinfo=schedule.zone).astimezone(ZoneInfo("UTC"))


def schedule_of(reminder: Reminder) -> Schedule:
    zone = ZoneInfo(reminder.time_zone)
    starts = datetime.fromisoformat(reminder.starts_local)
    return Schedule(starts, zone, parse_rule(reminder.rrule, starts) if reminder.rrule else None)
