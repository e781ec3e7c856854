"""Reminders: scheduled in the person's time zone, fired by a task enqueued with run_after (the database task
backend and its worker, as in production); time is moved by moving the task's run_after, never by sleeping."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from conversations.models import Message, Role, Source
from reminders import services
from reminders.firing import fire_reminder
from reminders.models import Reminder, ReminderStatus
from tests.test_task_backends import DATABASE_BACKEND

pytestmark = pytest.mark.django_db(transaction=True)  # the worker closes old connections between tasks

UTC = ZoneInfo("UTC")


@pytest.fixture
def person(user, settings):
    settings.TASKS = DATABASE_BACKEND
    user.profile.time_zone = "Europe/Paris"
    user.profile.save()
    return user


def local(days: int, hour: int, minute: int = 0) -> str:
    """A local time in Paris, days from now, as the model would send it."""
    day = timezone.now().astimezone(ZoneInfo("Europe/Paris")).date() + timedelta(days=days)
    return f"{day.isoformat()}T{hour:02d}:{minute:02d}"


def run_worker(max_tasks: int) -> None:
    """The Procfile's worker, bounded, running the tasks (reminders) only: no message waits for delivery here."""
    call_command(
        "worker",
        batch=True,
        max_tasks=max_tasks,
        startup_delay=False,
        reload=False,
        interval=0,
        verbosity=0,
        only="tasks",
    )


def reminder_tasks():
    return DBTaskResult.objects.filter(task_path=fire_reminder.module_path)


def make_due(task: DBTaskResult) -> None:
    """Time moves on: the task's run_after is now in the past."""
    DBTaskResult.objects.filter(pk=task.pk).update(run_after=timezone.now() - timedelta(seconds=1))


def reminders_in_thread():
    return list(Message.objects.filter(source=Source.REMINDER).values_list("text", flat=True))


def test_a_reminder_is_read_in_the_persons_time_zone_and_enqueued_for_its_time(person):
    reminder = services.schedule_reminder(person, "Stretch", local(1, 15))

    expected = datetime.fromisoformat(local(1, 15)).replace(tzinfo=ZoneInfo("Europe/Paris")).astimezone(UTC)
    assert reminder.next_due_at == expected
    task = reminder_tasks().get()
    assert task.run_after == expected
    assert task.args_kwargs["args"] == [reminder.pk, expected.isoformat()]


def test_a_future_reminder_does_not_fire_before_its_time_and_fires_after(person):
    reminder = services.schedule_reminder(person, "Stretch", local(1, 15))

    run_worker(max_tasks=5)
    assert reminders_in_thread() == []  # not due yet: the worker leaves it

    make_due(reminder_tasks().get())
    run_worker(max_tasks=5)

    assert reminders_in_thread() == ["Reminder: Stretch"]
    message = Message.objects.get(source=Source.REMINDER)
    assert message.role == Role.ASSISTANT
    reminder.refresh_from_db()
    assert (reminder.status, reminder.fired_count, reminder.next_due_at) == (ReminderStatus.DONE, 1, None)


def test_a_reminder_whose_time_passed_while_no_worker_ran_fires_at_once(person):
    services.schedule_reminder(person, "Stretch", local(1, 15))
    Reminder.objects.update(next_due_at=timezone.now() - timedelta(hours=3))
    task = reminder_tasks().get()
    DBTaskResult.objects.filter(pk=task.pk).update(
        run_after=timezone.now() - timedelta(hours=3),
        args_kwargs={"args": [Reminder.objects.get().pk, Reminder.objects.get().next_due_at.isoformat()], "kwargs": {}},
    )

    run_worker(max_tasks=5)

    assert reminders_in_thread() == ["Reminder: Stretch"]


def test_a_one_off_reminder_in_the_past_is_refused(person):
    with pytest.raises(services.ReminderRefused, match="That time has passed"):
        services.schedule_reminder(person, "Stretch", local(-1, 9))
    assert not Reminder.objects.exists()


def test_a_recurring_reminder_fires_and_enqueues_its_next_occurrence_at_the_same_local_time(person):
    reminder = services.schedule_reminder(person, "Water the plants", local(1, 9), "FREQ=DAILY")
    first_due = reminder.next_due_at

    make_due(reminder_tasks().get())
    run_worker(max_tasks=1)

    reminder.refresh_from_db()
    assert reminders_in_thread() == ["Reminder: Water the plants"]
    assert reminder.status == ReminderStatus.SCHEDULED
    next_local = reminder.next_due_at.astimezone(ZoneInfo("Europe/Paris"))
    assert (next_local.hour, next_local.minute) == (9, 0)
    assert reminder.next_due_at > first_due
    pending = reminder_tasks().filter(status="READY").get()
    assert pending.run_after == reminder.next_due_at


def test_a_recurring_reminder_skips_occurrences_missed_while_no_worker_ran(person):
    reminder = services.schedule_reminder(person, "Stand up", local(0, 0), "FREQ=HOURLY")
    due = timezone.now() - timedelta(hours=5)
    Reminder.objects.update(next_due_at=due)

    fired = services_fire(reminder.pk, due)

    assert fired == "fired"
    reminder.refresh_from_db()
    assert reminder.next_due_at > timezone.now()  # not five catch-up reminders: the next one ahead
    assert len(reminders_in_thread()) == 1


def services_fire(pk, due):
    from reminders.firing import fire

    return fire(pk, due)


def test_a_cancelled_reminder_does_not_fire(person):
    reminder = services.schedule_reminder(person, "Stretch", local(1, 15))
    services.cancel_reminder(person, reminder.public_id)

    make_due(reminder_tasks().get())
    run_worker(max_tasks=5)

    assert reminders_in_thread() == []
    reminder.refresh_from_db()
    assert reminder.status == ReminderStatus.CANCELLED


@pytest.mark.parametrize(
    ("when", "rrule", "fragment"),
    [
        ("tomorrow at 3", "", "not a date and time"),
        ("2099-01-01T10:00", "FREQ=MINUTELY", "at most hourly"),
        ("2099-01-01T10:00", "FREQ=SOMETIMES", "not an RFC 5545 RRULE"),
        ("2099-01-01T10:00", "FREQ=DAILY\nFREQ=WEEKLY", "line breaks"),
        ("2099-01-01T10:00", "FREQ=DAILY;UNTIL=20980101T000000", "no occurrence"),
        # Issue 26 item 2: "at most hourly" is the real interval between occurrences, whatever the rule's parts
        ("2099-01-01T10:00", "FREQ=HOURLY;BYMINUTE=0,1,2,3;BYSECOND=0,30;COUNT=40", "at most hourly"),
        ("2099-01-01T10:00", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0,30", "at most hourly"),
        ("2099-01-01T10:00", "FREQ=HOURLY;BYSECOND=0,1", "at most hourly"),
        ("2099-01-01T10:00", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9,10;BYMINUTE=15,45", "at most hourly"),
        # ...and a rule that never falls on a real date is refused, not searched for until the year 9999
        ("2099-01-01T10:00", "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30", "never falls on a date"),
        ("2099-01-01T10:00", "FREQ=DAILY;BYMONTH=4,6,9,11;BYMONTHDAY=31,-31", "never falls on a date"),
        ("2099-01-01T10:00", "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1", "BYYEARDAY"),
        ("2099-01-01T10:00", "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=1", "BYWEEKNO"),
        ("2099-01-01T10:00", "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=7", "BYSETPOS"),
        ("2099-01-01T10:00", "FREQ=YEARLY;BYEASTER=0", "BYEASTER"),
        # a monthly or yearly rule that names no day falls on the start's day (RFC 5545): 31 January, in February
        ("2099-01-31T10:00", "FREQ=YEARLY;BYMONTH=2", "never falls on a date"),
        ("2099-01-30T10:00", "FREQ=MONTHLY;BYMONTH=2", "never falls on a date"),
    ],
)
def test_bad_times_and_rules_are_refused_with_the_reason(person, when, rrule, fragment):
    with pytest.raises(services.ReminderRefused, match=fragment):
        services.schedule_reminder(person, "Stretch", when, rrule)


@pytest.mark.parametrize(
    "rrule",
    [
        "FREQ=HOURLY",
        "FREQ=HOURLY;INTERVAL=2;BYMINUTE=30",
        "FREQ=DAILY;BYHOUR=9,13,18",
        "FREQ=MONTHLY;BYMONTHDAY=31",  # the months that have one
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",  # every fourth year
        "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
        "FREQ=MONTHLY;BYDAY=-1FR",
    ],
)
def test_ordinary_rules_are_accepted(person, rrule):
    assert services.schedule_reminder(person, "Stretch", local(1, 9), rrule).rrule == rrule


def test_sendreminders_fires_what_is_due_for_the_immediate_backend(user, settings):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    reminder = services.schedule_reminder(user, "Stretch", "2099-01-01T10:00")
    call_command("sendreminders")
    assert reminders_in_thread() == []
    Reminder.objects.filter(pk=reminder.pk).update(next_due_at=timezone.now() - timedelta(minutes=1))
    call_command("sendreminders")
    assert reminders_in_thread() == ["Reminder: Stretch"]


def test_a_deactivated_accounts_reminders_do_not_fire(person):
    """15 of 15 were sent after deactivation. Staff deactivate with a plain UPDATE (the admin), as here: the firing
    itself must look. Occurrences due meanwhile are skipped, not saved up; the schedule goes on for a reactivation."""
    from django.contrib.auth import get_user_model

    recurring = services.schedule_reminder(person, "Stand up", local(1, 9), "FREQ=DAILY")
    once = services.schedule_reminder(person, "Call the bank", local(1, 10))
    get_user_model().objects.filter(pk=person.pk).update(is_active=False)

    for task in reminder_tasks():
        make_due(task)
    run_worker(max_tasks=2)

    assert reminders_in_thread() == []  # so nothing goes to the person's phone either (the outbox follows the thread)
    recurring.refresh_from_db()
    once.refresh_from_db()
    assert (recurring.status, recurring.fired_count) == (ReminderStatus.SCHEDULED, 0)
    assert recurring.next_due_at > timezone.now()
    assert reminder_tasks().filter(status="READY").get().run_after == recurring.next_due_at
    assert (once.status, once.fired_count) == (ReminderStatus.DONE, 0)
