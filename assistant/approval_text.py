"""An approval request a person can judge in one glance, on a phone as in the thread
(docs/howto/approve-from-phone.md):
what will happen in words, who asked, until when they may answer, where to see it in the console, and how to answer
from the phone ("Reply YES K7QZ4MX2 to approve or NO K7QZ4MX2 to deny."). Never the call's raw JSON, never an internal
id.

The last line of a request is ``reply_line(code)``: SMS, iMessage and WhatsApp through Twilio show it as it is, and
the channels with buttons (Telegram, WhatsApp's Cloud API) replace it with Approve / Deny buttons
(channels/approvals.py reads it back with ``REPLY_LINE``)."""

import re
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from accounts import words
from assistant.models import Action
from connections.models import Tool
from reminders.models import Reminder

VALUE_CHARACTERS = 80  # one argument's value on a phone; the console shows it whole
ARGUMENT_LINES = 8
REPLY_LINE = re.compile(r"^Reply YES (?P<code>[A-Z0-9]{8}) to approve or NO (?P=code) to deny\.$")


def reply_line(code: str) -> str:
    return f"Reply YES {code} to approve or NO {code} to deny."


def console_link(action: Action) -> str:
    return settings.PUBLIC_BASE_URL + reverse("approvals:detail", args=[action.pk])


def request_text(action: Action, zone: ZoneInfo) -> str:
    """The asking message: what, who asked, until when, the console link, and (with a code) the reply line last."""
    lines = [f"Approve this? {what_happens(action, zone)}", f"Asked by {_asker(action.requested_by)}."]
    if action.approval_expires_at is not None:
        lines.append(f"Nothing happens unless you approve it by {moment(action.approval_expires_at, zone)}.")
    else:
        lines.append("Nothing happens unless you approve it.")
    lines.append(f"See it in the console: {console_link(action)}")
    if action.approval_code:
        lines.append(reply_line(action.approval_code))
    return "\n".join(lines)


def _asker(requested_by: str) -> str:
    """Who asked, to follow "Asked by": "API key “ci” (psk_…ab12)", "the webhook trigger “…”", "your request, after
    reading what the tool mail_read returned"."""
    who = requested_by.strip().removesuffix(".") or "an automation"
    return who[:1].lower() + who[1:] if who.startswith(("Your ", "The ", "An ", "A ")) else who


def what_happens(action: Action, zone: ZoneInfo) -> str:
    """One sentence (and for an MCP tool, its arguments as short ``name: value`` lines) saying what the call does."""
    return in_words(action.tool, action.arguments, zone, connection=action.connection_name, title=_title(action))


def summary(action: Action, zone: ZoneInfo) -> str:
    """``what_happens`` as one line to go inside a sentence: no arguments' lines, no closing period, lower case."""
    first = what_happens(action, zone).split("\n", 1)[0].removesuffix(".").removesuffix(" with:")
    return first[:1].lower() + first[1:]


def in_words(tool: str, arguments: Any, zone: ZoneInfo, *, connection: str = "", title: str = "") -> str:
    """What calling ``tool`` with ``arguments`` will do, in words. A built-in tool has its own sentence; any other
    (an MCP server's) is its title and its arguments, one ``name: value`` line each."""
    given = arguments if isinstance(arguments, dict) else {}
    if not connection:
        sentence = _built_in(tool, given, zone)
        if sentence:
            return sentence
    name = title or tool
    head = f"Use “{_short(name)}” ({connection})" if connection else f"Use “{_short(name)}”"
    lines = [f"{head}" + (" with:" if given else " (no arguments).")]
    for key, value in list(given.items())[:ARGUMENT_LINES]:
        lines.append(f"{_short(str(key), 40)}: {_value(value)}")
    if len(given) > ARGUMENT_LINES:
        lines.append(f"… and {len(given) - ARGUMENT_LINES} more")
    return "\n".join(lines)


def _built_in(tool: str, given: dict[str, Any], zone: ZoneInfo) -> str:
    if tool == "schedule_reminder":
        what, when = _short(_text(given.get("text"))), _local_moment(given.get("when"), zone)
        repeat = _repeating(given.get("rrule"), given.get("when"), zone)
        if repeat:
            return f"Remind you “{what}” {repeat.removeprefix(', ')}, starting {when}."
        return f"Remind you “{what}” on {when}."
    if tool == "cancel_reminder":
        return f"Cancel your reminder {_reminder(given.get('id'))}."
    if tool == "calendar_create_event":
        span = _span(given.get("start"), given.get("end"), zone)
        where = f", at {_short(_text(given.get('location')), 60)}" if _text(given.get("location")) else ""
        repeat = _repeating(given.get("rrule"), given.get("start"), zone)
        return f"Add “{_short(_text(given.get('summary')))}” to your calendar, {span}{where}{repeat}."
    if tool == "calendar_delete_event":
        return "Delete an event from your calendar."
    if tool in ("mail_send", "mail_draft"):
        verb = "Send an email" if tool == "mail_send" else "Save a draft email"
        return f"{verb} to {_short(_text(given.get('to')), 120)}, subject “{_short(_text(given.get('subject')))}”."
    return ""


def moment(value: datetime, zone: ZoneInfo) -> str:
    """A day and time such as "Fri 4 Dec, 13:00" in the person's zone (accounts/words.py), with "UTC" when that is
    their zone (a person who never set theirs should know which clock it is)."""
    said = words.moment(value, zone, now=timezone.now())
    return said + (" UTC" if zone.key == "UTC" else "")


def _local_moment(value: Any, zone: ZoneInfo) -> str:
    parsed = _parsed(value, zone)
    if parsed is None:
        return f"“{_short(_text(value), 40)}”"
    if isinstance(parsed, datetime):
        return moment(parsed, zone)
    return words.day(parsed, now=timezone.now().astimezone(zone))


def _repeating(rule: Any, start: Any, zone: ZoneInfo) -> str:
    """ ", every Monday at 09:00" for a rule, never the rule itself ("on a repeating schedule" when it cannot be
    said)."""
    if not isinstance(rule, str) or not rule.strip():
        return ""
    first = _parsed(start, zone)
    return ", " + words.repetition(rule, words.local(first) if isinstance(first, datetime) else None)


def _span(start: Any, end: Any, zone: ZoneInfo) -> str:
    first, last = _parsed(start, zone), _parsed(end, zone)
    if first is None or last is None or isinstance(first, datetime) != isinstance(last, datetime):
        return _local_moment(start, zone)
    return words.span(first, last, zone) + ("" if isinstance(first, datetime) else ", all day")


def _parsed(value: Any, zone: ZoneInfo) -> datetime | date | None:
    """A tool's local ISO time (or date), as the tools read it: without an offset it is the person's."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text)
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed.astimezone(zone)


def _reminder(public_id: Any) -> str:
    found = Reminder.objects.filter(public_id=str(public_id)[:24]).values_list("text", flat=True).first()
    return f"“{_short(found)}”" if found else "(one that no longer exists)"


def _title(action: Action) -> str:
    if action.connection_id is None:
        return ""
    found = Tool.objects.filter(connection_id=action.connection_id, name=action.tool).values_list("title", flat=True)
    return next(iter(found), "") or ""


def _value(value: Any) -> str:
    """An argument's value as a person reads it: text as it is, a list as its items, an object as name: value."""
    if isinstance(value, str):
        return _short(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, list):
        return _short(", ".join(_value(item) for item in value[:10]))
    if isinstance(value, dict):
        return _short(", ".join(f"{key}: {_value(item)}" for key, item in list(value.items())[:10]))
    return _short(str(value))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _short(text: str, limit: int = VALUE_CHARACTERS) -> str:
    """One line of at most ``limit`` characters (line breaks become spaces)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
