"""Reminders the assistant schedules for a person: a text at a time, once or repeating (an RFC 5545 RRULE), read
in the person's time zone and delivered back into their thread by a task that runs at the due time."""

import secrets
import string
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts import words

_ALPHABET = string.digits + string.ascii_letters


def new_reminder_id() -> str:
    return "rem_" + "".join(secrets.choice(_ALPHABET) for _ in range(16))


class ReminderStatus(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


class Reminder(models.Model):
    public_id = models.CharField(max_length=24, unique=True, default=new_reminder_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reminders")
    text = models.TextField()
    time_zone = models.CharField(max_length=64, help_text="The time zone the time and the rule are read in.")
    # The first occurrence, as the person meant it in their time zone (naive local time, ISO 8601).
    starts_local = models.CharField(max_length=32)
    rrule = models.CharField(max_length=500, blank=True, help_text="RFC 5545 RRULE; empty for a one-off reminder.")
    status = models.CharField(max_length=16, choices=ReminderStatus.choices, default=ReminderStatus.SCHEDULED)
    next_due_at = models.DateTimeField(null=True, blank=True, help_text="When it fires next (UTC).")
    fired_count = models.PositiveIntegerField(default=0)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["next_due_at", "id"]
        indexes = [
            models.Index(fields=["owner", "status", "next_due_at"]),
            models.Index(fields=["status", "next_due_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.text[:60]} ({self.status})"

    @property
    def recurring(self) -> bool:
        return bool(self.rrule)

    @property
    def repeats(self) -> str:
        """How it repeats, in words ("every Monday at 09:00"); empty for a one-off."""
        if not self.rrule:
            return ""
        return words.repetition(self.rrule, _local_start(self.starts_local))

    @property
    def schedule_said(self) -> str:
        """When it fires, in words and in its time zone: "Mon 30 Nov, 09:00", or "every Monday at 09:00 (next: Mon 30
        Nov, 09:00)"; its first time, or how it repeats, once it is done or cancelled."""
        start = _local_start(self.starts_local)
        if self.next_due_at is not None:
            return words.schedule(self.next_due_at, self.rrule, start, zone=self.time_zone)
        if self.rrule:
            return self.repeats
        return words.moment(start) if start is not None else ""


def _local_start(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
