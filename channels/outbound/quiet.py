"""Quiet hours: a span of the person's day (in their own time zone, the profile's) when nothing is sent to their
phone. A send that falls inside waits until the span ends; the thread shows the message at once either way.

A span may cross midnight (22:00 to 07:00). On a day when the clocks change, the end is read as that wall-clock
time on that day (zoneinfo's first reading of an ambiguous time; a time that does not exist is moved forward by
the gap), so a quiet night is never cut short by the change, nor made an hour longer than the person said.
"""

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def quiet_until(now: datetime, time_zone: str, starts: time | None, ends: time | None) -> datetime | None:
    """When the quiet span around ``now`` ends (an aware datetime), or None when ``now`` is not inside one (or the
    person has none: both times needed, and equal times mean none)."""
    if starts is None or ends is None or starts == ends:
        return None
    tz = zone(time_zone)
    local = now.astimezone(tz)
    clock = local.time().replace(tzinfo=None)
    if starts < ends:  # the same day: 13:00 to 14:00
        if not starts <= clock < ends:
            return None
        end_day = local.date()
    elif clock >= starts:  # across midnight, before it: 22:00 to 07:00, now 23:10
        end_day = local.date() + timedelta(days=1)
    elif clock < ends:  # across midnight, after it: now 05:40
        end_day = local.date()
    else:
        return None
    end = datetime.combine(end_day, ends, tzinfo=tz)
    # A wall-clock time the change of clocks skipped: round trip through UTC moves it past the gap.
    end = end.astimezone(ZoneInfo("UTC")).astimezone(tz)
    return end if end > now else None
