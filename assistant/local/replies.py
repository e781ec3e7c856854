"""The built-in assistant's words: what a tool's result says, put briefly for a person, and what it can do."""

import json
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from assistant.local import times

LISTED = 10


def parsed(result: str, member: str) -> list[dict[str, Any]] | None:
    """The list under ``member`` of a tool's JSON result; None when the result is not that (a sentence instead)."""
    try:
        found = json.loads(result)
    except ValueError:
        return None
    items = found.get(member) if isinstance(found, dict) else found
    if not isinstance(items, list):
        return None
    return [item for item in items if isinstance(item, dict)]


def reminders(result: str, now: datetime) -> str:
    found = parsed(result, "reminders")
    if not found:
        return "You have no reminders scheduled." if found is not None or "No reminders" in result else result
    lines = [f"- {reminder_line(item, now)}" for item in found[:LISTED]]
    more = [f"…and {len(found) - LISTED} more (see the Reminders page)."] if len(found) > LISTED else []
    noun = "reminder" if len(found) == 1 else "reminders"
    return "\n".join([f"You have {len(found)} {noun}:", *lines, *more])


def reminder_line(item: dict[str, Any], now: datetime) -> str:
    """ "Stretch: tomorrow at 15:00", "Stand up: every weekday at 09:00 (next: tomorrow at 09:00)"."""
    text, repeats = str(item.get("text", "")), str(item.get("repeats") or "")
    try:
        when = datetime.fromisoformat(str(item.get("next"))).replace(tzinfo=None)
    except ValueError:
        return f"{text}: {repeats}" if repeats else text
    if repeats:
        return f"{text}: {repeats} (next: {times.spoken(when, now).removeprefix('on ')})"
    return f"{text}: {times.spoken(when, now)}"


def webhooks(result: str) -> str:
    found = parsed(result, "triggers")
    if not found:
        if found is None and "no webhook" not in result:
            return result
        return "You have no webhooks. Add one on the Webhooks page."
    lines = []
    for item in found[:LISTED]:
        fired = item.get("fireCount") or 0
        lines.append(f"- {_when(str(item.get('condition', '')))}: {item.get('action', '')} (fired {_times(fired)})")
    noun = "webhook" if len(found) == 1 else "webhooks"
    return "\n".join([f"You have {len(found)} {noun}:", *lines])


def _when(condition: str) -> str:
    """ "when a build fails"; a condition written as a sentence ("When the nightly backup fails") is kept as it is,
    never "when When …"."""
    condition = " ".join(condition.split())
    if re.match(r"^(?:when|whenever|if|on|after|before|every|each)\b", condition, re.I):
        return condition[:1].upper() + condition[1:]
    return f"when {condition}"


def _times(count: Any) -> str:
    return "once" if count == 1 else f"{count} times"


def events(result: str, label: str, zone: ZoneInfo, now: datetime) -> str:
    found = parsed(result, "events")
    if found is None:
        return result
    if not found:
        return f"Nothing on your calendar {label}."
    lines = [f"- {_event_line(item, zone, now)}" for item in found[:LISTED]]
    return "\n".join([f"On your calendar {label}:", *lines])


def _event_line(item: dict[str, Any], zone: ZoneInfo, now: datetime) -> str:
    summary = str(item.get("summary") or "(no title)")
    try:
        start = datetime.fromisoformat(str(item.get("start")))
    except ValueError:
        return summary
    if start.tzinfo is not None:
        start = start.astimezone(zone).replace(tzinfo=None)
    where = f" ({item['location']})" if item.get("location") else ""
    if item.get("allDay"):
        return f"{summary}{where}, all day"
    return f"{times.clock(start)} {summary}{where}"


def mail(result: str, unread: bool = True) -> str:
    """The senders and subjects a search found; ``unread``: it looked for unread mail only."""
    found = parsed(result, "messages")
    if not found:
        if found is None and not result.startswith("No message"):
            return result
        return "No unread mail." if unread else "No mail matches."
    lines = [f"- {item.get('from', '')}: {item.get('subject') or '(no subject)'}" for item in found[:LISTED]]
    total = _matched(result, len(found))
    if total > len(lines):
        lines.append(f"…and {total - len(lines)} more.")
    noun = "message" if total == 1 else "messages"
    return "\n".join([f"{total} {'unread ' if unread else ''}{noun}:", *lines])


def _matched(result: str, listed: int) -> int:
    """How many matched in all: the search lists only the newest."""
    found = json.loads(result)
    matched = found.get("matched") if isinstance(found, dict) else None
    return matched if isinstance(matched, int) and matched > listed else listed
