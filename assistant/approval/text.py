"""An approval request a person can judge in one glance, on a phone as in the thread
(docs/howto/approve-from-phone.md):
what will happen in words, who asked, until when they may answer, where to see it in the console, and how to answer
from the phone ("Reply YES K7QZ4MX2 to approve or NO K7QZ4MX2 to deny."). Never the call's raw JSON, never an internal
id.

Honest (docs/explanation/approval.md#what-the-request-shows): our own tools are said in our words; an MCP server's
tool by its real name and its connection first ("Run wire_funds on Bank"), its title only as the server's words
("the server calls it …"), and every argument whole, or cut with the console's link and every address in it
listed; a mail by each recipient's address (the display name after it), its subject and its body's first lines.
Control and direction characters are shown as "[U+202E]", never obeyed (ops/visible.py). Who asked is a noun
phrase that ends every sentence it is put in (``requester``).

The last line of a request is ``reply_line(code)``: SMS, iMessage and WhatsApp through Twilio show it as it is, and
the channels with buttons (Telegram, WhatsApp's Cloud API) replace it with Approve / Deny buttons
(channels/approvals.py reads it back with ``REPLY_LINE``)."""

import re
from datetime import date, datetime
from email.utils import getaddresses
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from accounts import words
from assistant.approval.rule import Origin
from assistant.models import Action
from connections.models import Tool
from ops.visible import visible
from reminders.models import Reminder

VALUE_CHARACTERS = 80  # a name or a title inside a sentence
ARGUMENT_CHARACTERS = 300  # one argument's value on a phone: longer ones are cut, their addresses listed
ARGUMENT_LINES = 8
BODY_LINES = 3  # a mail's first lines in its request
BODY_LINE_CHARACTERS = 160
# What a cut must not hide: an e-mail address, a web address.
ADDRESS = re.compile(r"[^\s<>()\[\]\"',;:]+@[^\s<>()\[\]\"',;:]+\.[^\s<>()\[\]\"',;:]+|https?://[^\s<>\"]+")

# What brought words from outside the person in, after "after reading" (Toolbox.read_from).
FOLLOW_UP = "a tool's follow-up"
APPROVAL = "a request you approved"
THREAD = "the messages of others in your thread"
GONE_AUTOMATION = "an automation that no longer exists"
REPLY_LINE = re.compile(r"^Reply YES (?P<code>[A-Z0-9]{8}) to approve or NO (?P=code) to deny\.$")


def reply_line(code: str) -> str:
    return f"Reply YES {code} to approve or NO {code} to deny."


def console_link(action: Action) -> str:
    return settings.PUBLIC_BASE_URL + reverse("approvals:detail", args=[action.pk])


def request_text(action: Action, zone: ZoneInfo) -> str:
    """The asking message: what, who asked, until when, the console link, and (with a code) the reply line last."""
    lines = [f"Approve this? {what_happens(action, zone)}", f"Asked by {asked_by(action.requested_by)}."]
    if action.approval_expires_at is not None:
        lines.append(f"Nothing happens unless you approve it by {moment(action.approval_expires_at, zone)}.")
    else:
        lines.append("Nothing happens unless you approve it.")
    lines.append(f"See it in the console: {console_link(action)}")
    if action.approval_code:
        lines.append(reply_line(action.approval_code))
    return visible("\n".join(lines))


def tool_read(name: str, connection: str = "") -> str:
    """What a tool brought in, after "after reading": "what the tool mail_read returned"."""
    return f"what the tool {name} of {connection} returned" if connection else f"what the tool {name} returned"


def requester(origin: Origin, who: str, read: str) -> str:
    """Who asked, as a noun phrase that ends a sentence ("Asked by …", "…, asked for by …"): ``who`` (the key or
    trigger; blank for the person's own message), and ``read``, what brought outside words in (blank: nothing)."""
    asker = who or ("your own message" if origin is Origin.PERSON else GONE_AUTOMATION)
    return f"{asker}, after reading {read}" if read else asker


def asked_by(requested_by: str) -> str:
    """Who asked, to follow "Asked by": "API key “ci” (psk_…ab12)", "the webhook trigger “…”", "your own message,
    after reading what the tool mail_read returned" (a request stored before these words reads as it was)."""
    who = visible(requested_by.strip().removesuffix(".")) or "an automation"
    return who[:1].lower() + who[1:] if who.startswith(("Your ", "The ", "An ", "A ")) else who


def what_happens(action: Action, zone: ZoneInfo) -> str:
    """One sentence (then, for an MCP tool, its arguments as ``name: value`` lines; for a mail, its first lines)
    saying what the call does."""
    return in_words(action.tool, action.arguments, zone, connection=action.connection_name, title=_title(action))


def summary(action: Action, zone: ZoneInfo) -> str:
    """``what_happens`` as one line to go inside a sentence: no arguments' lines, no closing period, lower case."""
    first = what_happens(action, zone).split("\n", 1)[0].removesuffix(".").removesuffix(" with:")
    return first[:1].lower() + first[1:]


def in_words(tool: str, arguments: Any, zone: ZoneInfo, *, connection: str = "", title: str = "") -> str:
    """What calling ``tool`` with ``arguments`` will do, in words. A built-in tool has its own sentence; any other
    (an MCP server's) is its real name and its connection first, its title as the server's words, then its
    arguments, one ``name: value`` line each."""
    given = arguments if isinstance(arguments, dict) else {}
    if not connection:
        sentence = _built_in(tool, given, zone)
        if sentence:
            return visible(sentence)
    head = f"Run {_whole(tool)} on {_whole(connection)}" if connection else f"Run {_whole(tool)}"
    if title and title != tool:
        head += f" (the server calls it “{_short(title)}”)"
    lines = [f"{head}" + (" with:" if given else " (no arguments).")]
    for key, value in list(given.items())[:ARGUMENT_LINES]:
        lines.append(f"{_whole(str(key), VALUE_CHARACTERS)}: {_value(value)}")
    if len(given) > ARGUMENT_LINES:
        lines.append(f"… and {len(given) - ARGUMENT_LINES} more (all of them in the console)")
    return visible("\n".join(lines))


def _built_in(tool: str, given: dict[str, Any], zone: ZoneInfo) -> str:
    if tool == "schedule_reminder":
        what, when = _whole(_text(given.get("text"))), _local_moment(given.get("when"), zone)
        repeat = _repeating(given.get("rrule"), given.get("when"), zone)
        if repeat:
            return f"Remind you “{what}” {repeat.removeprefix(', ')}, starting {when}."
        return f"Remind you “{what}” on {when}."
    if tool == "cancel_reminder":
        return f"Cancel your reminder {_reminder(given.get('id'))}."
    if tool == "calendar_create_event":
        span = _span(given.get("start"), given.get("end"), zone)
        where = f", at {_whole(_text(given.get('location')))}" if _text(given.get("location")) else ""
        repeat = _repeating(given.get("rrule"), given.get("start"), zone)
        return f"Add “{_whole(_text(given.get('summary')))}” to your calendar, {span}{where}{repeat}."
    if tool == "calendar_delete_event":
        return "Delete an event from your calendar."
    if tool in ("mail_send", "mail_draft"):
        return _mail(tool, given)
    return ""


def _mail(tool: str, given: dict[str, Any]) -> str:
    """Who it goes to (every address whole), its subject, and the first lines of its body."""
    verb = "Send an email" if tool == "mail_send" else "Save a draft email"
    subject = _whole(_text(given.get("subject")))
    lines = [f"{verb} to {_recipients(given.get('to'))}, subject “{subject}”."]
    body = [line.strip() for line in _text(given.get("body")).splitlines() if line.strip()]
    if body:
        lines.append("It begins:")
        lines += [f"“{_whole(line, BODY_LINE_CHARACTERS)}”" for line in body[:BODY_LINES]]
        if len(body) > BODY_LINES:
            lines.append(f"… and {len(body) - BODY_LINES} more lines (the whole mail in the console)")
    return "\n".join(lines)


def _recipients(to: Any) -> str:
    """Each recipient as the address the mail goes to, whole, its display name (shortened) after it: parsed as
    sending parses it (connections/mailboxes.py, ``recipients``)."""
    text = _text(to)
    found = [(name, address) for name, address in getaddresses([text]) if address]
    if not found:
        return _whole(text)
    return ", ".join(
        visible(address) + (f" (“{_short(name, 40)}”)" if name.strip() and name.strip() != address else "")
        for name, address in found
    )


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
    try:
        return words.parse_local(value.strip(), zone)
    except ValueError:
        return None


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
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    return _whole(_flat(value))


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_flat(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_flat(item)}" for key, item in value.items())
    return _text(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _short(text: str, limit: int = VALUE_CHARACTERS) -> str:
    """One line of at most ``limit`` characters (line breaks become spaces): for names and titles."""
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _whole(text: str, limit: int = ARGUMENT_CHARACTERS) -> str:
    """A value on one line, whole up to ``limit`` characters; a longer one is cut, says where it is whole, and lists
    every address the cut would hide."""
    flat = " ".join(visible(text).split())
    if len(flat) <= limit:
        return flat
    shown = flat[: limit - 1]
    hidden = [found.group() for found in ADDRESS.finditer(flat) if found.end() > len(shown)]
    also = f"; addresses in it: {', '.join(dict.fromkeys(hidden))}" if hidden else ""
    return f"{shown}… ({len(flat)} characters, whole in the console{also})"
