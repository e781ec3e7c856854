"""Scheduling, listing and cancelling reminders: what the assistant's tools and the console call. Each scheduled
occurrence is a task (reminders/firing.py)."""

import logging
from datetime import timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts import words
from accounts.services import profile_of
from reminders.firing import enqueue_firing
from reminders.models import Reminder, ReminderStatus
from reminders.schedules import ReminderRefused, Schedule, next_occurrence, parse_local, parse_rule, schedule_of

logger = logging.getLogger(__name__)

MAX_TEXT = 1000
MAX_SCHEDULED_PER_PERSON = 100
# A time this far in the past is taken as "now" (the model's idea of the current minute may lag); beyond, refused.
PAST_GRACE = timedelta(minutes=2)


def schedule_reminder(owner: User, text: str, when: str, rrule: str = "") -> Reminder:
    """A reminder at ``when`` (local time in the person's time zone), repeating by ``rrule`` when given."""
    text = " ".join(str(text or "").split())
    if not text:
        raise ReminderRefused("Say what to remind the person of (text).")
    if len(text) > MAX_TEXT or "\x00" in text:
        raise ReminderRefused(f"The reminder text is longer than {MAX_TEXT} characters.")
    zone = ZoneInfo(profile_of(owner).time_zone)
    starts_local = parse_local(str(when or ""), zone)
    rule = parse_rule(rrule, starts_local) if rrule and rrule.strip() else None
    schedule = Schedule(starts_local, zone, rule)
    now = timezone.now()
    first = starts_local.replace(tzinfo=zone).astimezone(ZoneInfo("UTC"))
    if rule is None and first < now - PAST_GRACE:
        said = words.moment(now, zone, now=now)
        raise ReminderRefused(f"That time has passed: it is {said} where you are ({zone.key}). Choose a later time.")
    if rule is not None:
        first = next_occurrence(schedule, now - timedelta(seconds=1)) or first
        if rule.after(starts_local - timedelta(seconds=1), inc=True) is None:
            raise ReminderRefused("The RRULE has no occurrence at or after the start time.")
    if Reminder.objects.filter(owner=owner, status=ReminderStatus.SCHEDULED).count() >= MAX_SCHEDULED_PER_PERSON:
        raise ReminderRefused(f"The person already has {MAX_SCHEDULED_PER_PERSON} scheduled reminders.")
    with transaction.atomic():
        reminder = Reminder.objects.create(
            owner=owner,
            text=text,
            time_zone=zone.key,
            starts_local=starts_local.isoformat(timespec="minutes"),
            rrule=rrule.strip().removeprefix("RRULE:") if rule is not None else "",
            next_due_at=max(first, now),
        )
        enqueue_firing(reminder)
    logger.info("reminder %s scheduled for user %s at %s", reminder.public_id, owner.pk, reminder.next_due_at)
    return reminder


def scheduled_reminders(owner: User) -> list[Reminder]:
    return list(Reminder.objects.filter(owner=owner, status=ReminderStatus.SCHEDULED).order_by("next_due_at"))


def cancel_reminder(owner: User, public_id: str) -> Reminder:
    with transaction.atomic():
        reminder = Reminder.objects.select_for_update().filter(owner=owner, public_id=str(public_id)[:24]).first()
        if reminder is None:
            raise ReminderRefused(f"No reminder {str(public_id)[:24]!r}; list_reminders gives the ids.")
        if reminder.status != ReminderStatus.SCHEDULED:
            state = reminder.get_status_display().lower()
            raise ReminderRefused(f"The reminder “{reminder.text[:80]}” is already {state}.")
        reminder.status = ReminderStatus.CANCELLED
        reminder.cancelled_at = timezone.now()
        reminder.next_due_at = None
        reminder.save(update_fields=["status", "cancelled_at", "next_due_at"])
    return reminder


__all__ = ["ReminderRefused", "cancel_reminder", "schedule_of", "schedule_reminder", "scheduled_reminders"]
