"""An RFC 5545 RRULE (what the calendar tools take) as Microsoft Graph's patterned recurrence (``pattern`` and
``range``), for the rules Graph can hold: daily, weekly on some days, monthly on a day of the month or on the first
to fourth or last weekday, yearly on a date; every n-th time; until a date, a number of times, or without end. Any
other rule is refused with a sentence saying which forms work (Graph would refuse or change it)."""

from datetime import date, datetime
from typing import Any

from connections.network import ServiceError

_DAYS = {day[:2].upper(): day for day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")}
_INDEX = {1: "first", 2: "second", 3: "third", 4: "fourth", -1: "last"}
_FORMS = (
    "Microsoft calendars repeat daily, weekly on some days, monthly on a day or on the first to fourth or last "
    "weekday, or yearly on a date (with INTERVAL, and COUNT or UNTIL); "
)


def _refused(rule: str) -> ServiceError:
    return ServiceError(_FORMS + f"this rule is not one of those: {rule[:100]}")


def _parts(rule: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    for item in rule.split(";"):
        key, _equals, value = item.partition("=")
        if not key or not value or key.upper() in parts:
            raise _refused(rule)
        parts[key.upper()] = value.upper()
    return parts


def _until(value: str, rule: str) -> str:
    try:
        return (datetime.strptime(value[:8], "%Y%m%d")).date().isoformat()
    except ValueError:
        raise _refused(rule) from None


def _number(value: str, highest: int, rule: str) -> int:
    """A whole number from 1 to ``highest``, or the rule refused."""
    if not value.isdigit() or not 1 <= int(value) <= highest:
        raise _refused(rule)
    return int(value)


def _pattern(frequency: str, days: list[str], parts: dict[str, str], first: date, rule: str) -> dict[str, Any]:
    """Graph's ``pattern`` but its interval (takes BYMONTHDAY out of ``parts``)."""
    if frequency == "DAILY" and not days:
        return {"type": "daily"}
    if frequency == "WEEKLY":
        names = [_DAYS.get(day) for day in days] or [_DAYS[list(_DAYS)[first.weekday()]]]
        if None in names:
            raise _refused(rule)
        return {"type": "weekly", "daysOfWeek": names, "firstDayOfWeek": "monday"}
    if frequency == "MONTHLY" and not days:
        return {"type": "absoluteMonthly", "dayOfMonth": _number(parts.pop("BYMONTHDAY", str(first.day)), 31, rule)}
    if frequency == "MONTHLY" and len(days) == 1 and days[0][-2:] in _DAYS:
        try:
            index = _INDEX[int(days[0][:-2])]
        except (ValueError, KeyError):
            raise _refused(rule) from None
        return {"type": "relativeMonthly", "daysOfWeek": [_DAYS[days[0][-2:]]], "index": index}
    if frequency == "YEARLY" and not days:
        return {"type": "absoluteYearly", "dayOfMonth": first.day, "month": first.month}
    raise _refused(rule)


def recurrence(rule: str, first: date, zone_name: str) -> dict[str, Any]:
    """Graph's ``recurrence`` for ``rule`` (already checked as an RRULE) starting on ``first``."""
    parts = _parts(rule)
    frequency = parts.pop("FREQ", "")
    interval = _number(parts.pop("INTERVAL", "1"), 99, rule)
    days = [day for day in parts.pop("BYDAY", "").split(",") if day]
    pattern = {"interval": interval, **_pattern(frequency, days, parts, first, rule)}
    span: dict[str, Any] = {"type": "noEnd", "startDate": first.isoformat(), "recurrenceTimeZone": zone_name}
    if "COUNT" in parts:
        span.update(type="numbered", numberOfOccurrences=_number(parts.pop("COUNT"), 999, rule))
    elif "UNTIL" in parts:
        span.update(type="endDate", endDate=_until(parts.pop("UNTIL"), rule))
    parts.pop("WKST", None)
    if parts:  # BYHOUR, BYSETPOS, BYMONTH ... : Graph has no room for them
        raise _refused(rule)
    return {"pattern": pattern, "range": span}
