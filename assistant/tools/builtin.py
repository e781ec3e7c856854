"""Tools that need no integration: reminders, and the person's webhook triggers."""

import json
from typing import Any

from django.utils import timezone

from assistant.models import ToolKind
from assistant.tools import Call, Tool, ToolError, one_id
from reminders import services as reminders
from reminders.models import Reminder
from triggers import services as triggers


def _describe(reminder: Reminder) -> dict[str, Any]:
    due = reminder.next_due_at
    local = due.astimezone(reminders.schedule_of(reminder).zone) if due else None
    return {
        "id": reminder.public_id,
        "text": reminder.text,
        "next": local.isoformat(timespec="minutes") if local else None,
        # In words, not the RRULE: what the model reads here is what it says to the person.
        "repeats": reminder.repeats or None,
        "timeZone": reminder.time_zone,
    }


def schedule_reminder(arguments: dict[str, Any], call: Call) -> str:
    try:
        reminder = reminders.schedule_reminder(
            call.user, str(arguments.get("text", "")), str(arguments.get("when", "")), str(arguments.get("rrule") or "")
        )
    except reminders.ReminderRefused as refused:
        raise ToolError(str(refused)) from None
    # A sentence the person may read as it is (the built-in assistant says it after an approval): no id, no RRULE.
    return f"Scheduled the reminder “{reminder.text}”: {reminder.schedule_said}."


def list_reminders(arguments: dict[str, Any], call: Call) -> str:
    found = [_describe(reminder) for reminder in reminders.scheduled_reminders(call.user)]
    return json.dumps({"reminders": found}, ensure_ascii=False) if found else "No reminders are scheduled."


def cancel_reminder(arguments: dict[str, Any], call: Call) -> str:
    try:
        reminder = reminders.cancel_reminder(call.user, str(arguments.get("id", "")))
    except reminders.ReminderRefused as refused:
        raise ToolError(str(refused)) from None
    repeated = f" ({reminder.repeats})" if reminder.repeats else ""
    return f"Cancelled the reminder “{reminder.text}”{repeated}."


def list_webhook_triggers(arguments: dict[str, Any], call: Call) -> str:
    found = [
        {
            "id": trigger.public_id,
            "condition": trigger.condition,
            "action": trigger.action,
            "createdAt": trigger.created_at.isoformat(timespec="minutes"),
            "lastFiredAt": trigger.last_fired_at.isoformat(timespec="minutes") if trigger.last_fired_at else None,
            "fireCount": trigger.fire_count,
        }
        for trigger in triggers.triggers_of(call.user)
    ]  # never the token, its hint or the signing secret
    return json.dumps({"triggers": found}, ensure_ascii=False) if found else "The person has no webhook triggers."


def tools() -> list[Tool]:
    now = timezone.now()
    return [
        Tool(
            name="schedule_reminder",
            description=(
                "Remind the person of something at a time, once or repeating. The time is local to the person's "
                f"time zone (ISO 8601 without offset, e.g. {now:%Y-%m-%d}T15:00). For a repeating reminder add an "
                "RFC 5545 RRULE such as FREQ=DAILY or FREQ=WEEKLY;BYDAY=MO,WE; `when` is then the first time."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What to remind the person of."},
                    "when": {"type": "string", "description": "Local date and time, ISO 8601, e.g. 2026-11-24T15:00"},
                    "rrule": {"type": "string", "description": "Optional RFC 5545 RRULE for a repeating reminder."},
                },
                "required": ["text", "when"],
            },
            kind=ToolKind.BUILT_IN,
            run=schedule_reminder,
            brings_outside_content=False,  # says what it scheduled, in the words the model gave it
        ),
        Tool(
            name="list_reminders",
            description="List the person's scheduled reminders with their ids and next times.",
            parameters={"type": "object", "properties": {}},
            kind=ToolKind.BUILT_IN,
            run=list_reminders,
            read_only=True,
        ),
        Tool(
            name="cancel_reminder",
            description="Cancel one of the person's scheduled reminders by its id (from list_reminders).",
            parameters=one_id("The reminder's id, rem_…"),
            kind=ToolKind.BUILT_IN,
            run=cancel_reminder,
        ),
        Tool(
            name="list_webhook_triggers",
            description=(
                "List the person's active webhook triggers: when something happens elsewhere (the condition), a "
                "sender posts to the trigger and its action comes into this conversation."
            ),
            parameters={"type": "object", "properties": {}},
            kind=ToolKind.BUILT_IN,
            run=list_webhook_triggers,
            read_only=True,
        ),
    ]
