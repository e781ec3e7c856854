"""Reading a reminder's time and rule: occurrences in the person's time zone, as UTC instants."""

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from dateutil import rrule as dateutil_rrule

from reminders.models import Reminder

_TOO_FREQUENT = {dateutil_rrule.SECONDLY, dateutil_rrule.MINUTELY}


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
    if rule._freq in _TOO_FREQUENT:
        raise ReminderRefused("Reminders repeat at most hourly; use FREQ=HOURLY or a longer period.")
    return rule


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
