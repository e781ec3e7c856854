"""Firing a reminder at its time: a task enqueued with ``run_after`` (django.tasks), so the worker the Procfile
runs (`manage.py worker`) delivers it when it is due, and not before. Firing records the reminder in the thread
(and, like every assistant message, announces it to the ways out: the outbox sends it to the person's phone), and
enqueues the next occurrence of a recurring one. A task that
finds its reminder cancelled, or due at another time (it was rescheduled), does nothing."""

import logging
from datetime import datetime
from functools import partial

from django.db import transaction
from django.tasks import task
from django.utils import timezone
from django_tasks_db import DatabaseBackend

from conversations.models import Source
from conversations.services import assistant_message, conversation_of
from reminders.models import Reminder, ReminderStatus
from reminders.schedules import ReminderRefused, next_occurrence, schedule_of

logger = logging.getLogger(__name__)


@task
def fire_reminder(reminder_id: int, due_at: str) -> str:
    return fire(reminder_id, datetime.fromisoformat(due_at))


def can_defer() -> bool:
    return bool(fire_reminder.get_backend().supports_defer)


def enqueue_firing(reminder: Reminder) -> None:
    """Enqueue the reminder's next occurrence as part of the caller's transaction (the database backend writes its
    row in it; another backend is told after the commit). A backend that cannot run a task later (the immediate
    one) enqueues nothing: `manage.py sendreminders` fires what is due, from cron."""
    due_at = reminder.next_due_at
    if due_at is None or not can_defer():
        return
    queued = fire_reminder.using(run_after=due_at)
    if isinstance(queued.get_backend(), DatabaseBackend):
        queued.enqueue(reminder.pk, due_at.isoformat())
    else:
        transaction.on_commit(partial(queued.enqueue, reminder.pk, due_at.isoformat()), robust=True)


def fire(reminder_id: int, due_at: datetime) -> str:
    """Deliver the occurrence due at ``due_at``, if it is still the reminder's next one; schedule the next."""
    with transaction.atomic():
        reminder = Reminder.objects.select_for_update().select_related("owner").filter(pk=reminder_id).first()
        if reminder is None or reminder.status != ReminderStatus.SCHEDULED or reminder.next_due_at != due_at:
            return "skipped"  # cancelled, already fired, or rescheduled: another task owns the next occurrence
        now = timezone.now()
        # A deactivated account's occurrences are skipped, neither recorded nor sent; the schedule moves on, so a
        # reactivated account's reminders resume at their next occurrence instead of all at once.
        delivered = reminder.owner.is_active
        if delivered:
            assistant_message(
                conversation_of(reminder.owner).pk,
                f"Reminder: {reminder.text}",
                source=Source.REMINDER,
                context={"reminder": reminder.public_id, "due_at": due_at.isoformat()},
            )
            reminder.fired_count += 1
            reminder.last_fired_at = now
        # Occurrences missed while no worker ran are not all delivered at once: the next one is after now.
        try:
            upcoming = next_occurrence(schedule_of(reminder), max(now, due_at)) if reminder.recurring else None
        except ReminderRefused as refused:  # a rule stored before the checks of parse_rule refused its kind
            logger.warning("reminder %s ends: its rule is no longer accepted (%s)", reminder.public_id, refused)
            upcoming = None
        reminder.next_due_at = upcoming
        if upcoming is None:
            reminder.status = ReminderStatus.DONE
        reminder.save(update_fields=["fired_count", "last_fired_at", "next_due_at", "status"])
        if upcoming is not None:
            enqueue_firing(reminder)
        if not delivered:
            logger.info("reminder %s skipped: its account is deactivated", reminder.public_id)
            return "skipped"
    logger.info("reminder %s fired (%s)", reminder.public_id, reminder.fired_count)
    return "fired"


def fire_due(now: datetime | None = None) -> int:
    """Fire every reminder whose time has come: for a task backend that cannot run a task later (the immediate
    one), run from cron by `manage.py sendreminders`."""
    now = now or timezone.now()
    fired = 0
    due = Reminder.objects.filter(status=ReminderStatus.SCHEDULED, next_due_at__lte=now).values_list(
        "pk", "next_due_at"
    )
    for pk, due_at in list(due):
        if due_at is not None:
            fired += fire(pk, due_at) == "fired"
    return fired
