"""The worker's own housekeeping (delivery/housekeeping.py): with nothing but `manage.py db_worker` running, an
approval nobody answered expires; with two workers, each job runs in one of them at a time, about once a period."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from assistant.models import Action, ActionState, ToolKind
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from delivery import housekeeping
from delivery.housekeeping import Housekeeper, Job, claim
from delivery.models import HousekeepingRun
from tests.delivery_stack import Worker, wait_until
from tests.live_stack import private_database, require_postgres_and_redis, run_python

EXPIRE = Job("expireapprovals", 1)


def awaiting_approval(user, expires_in: float) -> Action:
    conversation = conversation_of(user)
    message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.API, text="file it")
    delivery = Delivery.objects.create(
        message=message, conversation=conversation, endpoint=Endpoint.CURRENT, status=DeliveryStatus.DELIVERED
    )
    return Action.objects.create(
        delivery=delivery,
        kind=ToolKind.BUILT_IN,
        tool="send_email",
        state=ActionState.AWAITING_APPROVAL,
        requested_by="key “ci”",
        approval_expires_at=timezone.now() + timedelta(seconds=expires_in),
    )


@pytest.mark.django_db
def test_a_job_is_claimed_once_per_period_and_only_once_its_run_finished(settings):
    settings.HOUSEKEEPING_SECONDS = 60
    start = timezone.now()
    assert claim(EXPIRE, start) is True
    assert claim(EXPIRE, start) is False  # another worker, at the same moment
    assert claim(EXPIRE, start + timedelta(seconds=61)) is False  # a period later, but the run has not finished
    HousekeepingRun.objects.filter(job=EXPIRE.command).update(finished_at=start + timedelta(seconds=1))
    assert claim(EXPIRE, start + timedelta(seconds=30)) is False  # finished, not yet due
    assert claim(EXPIRE, start + timedelta(seconds=61)) is True
    # A worker that died mid-run: its claim lapses after STALE_SECONDS.
    later = start + timedelta(seconds=61 + housekeeping.STALE_SECONDS + 1)
    assert claim(EXPIRE, later) is True


@pytest.mark.django_db
def test_a_due_round_expires_an_unanswered_approval_and_says_so(user, settings):
    settings.HOUSEKEEPING_SECONDS = 60
    action = awaiting_approval(user, expires_in=-1)

    ran = Housekeeper().tick()

    assert ran == [job.command for job in housekeeping.JOBS]  # the first round anywhere: every job
    action.refresh_from_db()
    assert action.state == ActionState.EXPIRED
    assert Message.objects.filter(role=Role.ASSISTANT, text__startswith="Nobody answered in time").count() == 1
    assert Housekeeper().tick() == []  # another worker right after: nothing is due


@pytest.mark.django_db
def test_a_failing_job_is_logged_and_the_others_run(settings, caplog):
    settings.HOUSEKEEPING_SECONDS = 60
    jobs = (Job("nosuchcommand", 1), EXPIRE)
    assert housekeeping.run_due(jobs=jobs) == ["nosuchcommand", "expireapprovals"]
    assert "housekeeping: nosuchcommand failed" in caplog.text
    assert HousekeepingRun.objects.get(job="nosuchcommand").finished_at is not None


def test_housekeeping_off_starts_no_thread(settings):
    settings.HOUSEKEEPING_SECONDS = 0
    keeper = Housekeeper()
    keeper.start()
    assert keeper._thread is None
    keeper.stop()


AWAITING = """
import json
import time
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from assistant.models import Action, ActionState, ToolKind
from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
person = get_user_model().objects.create_user("person", "person@example.com")
conversation = conversation_of(person)
message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.API, text="file it")
delivery = Delivery.objects.create(message=message, conversation=conversation, endpoint=Endpoint.CURRENT,
                                   status=DeliveryStatus.DELIVERED)
action = Action.objects.create(delivery=delivery, kind=ToolKind.BUILT_IN, tool="send_email",
                               state=ActionState.AWAITING_APPROVAL, requested_by="key ci",
                               approval_expires_at=timezone.now() + timedelta(seconds=3))
print(json.dumps(action.pk))
"""

STATE = """
import json
from assistant.models import Action
from conversations.models import Message
action = Action.objects.get(pk=%d)
told = Message.objects.filter(role="assistant", text__startswith="Nobody answered in time").count()
print(json.dumps([action.state, told]))
"""


def test_with_only_two_workers_running_an_approval_expires_once():
    """No cron, no command: two real `manage.py db_worker` processes, housekeeping every second."""
    require_postgres_and_redis()
    with private_database("housekeeping") as database_url:
        env = {"DATABASE_URL": database_url, "TASK_BACKEND": "database", "HOUSEKEEPING_SECONDS": "1"}
        action_id = run_python(AWAITING, env)
        started = time.monotonic()
        workers = [Worker({**env, "LOG_LEVEL": "INFO"}, f"housekeeping-{n}") for n in range(2)]
        try:
            state = wait_until(
                lambda: (found := run_python(STATE % action_id, env))[0] == "expired" and found, 30, "expired"
            )
            rounds = sum(worker.output().count("housekeeping: expireapprovals:") for worker in workers)
            seconds = time.monotonic() - started
        finally:
            for worker in workers:
                worker.stop()
    assert state == ["expired", 1]  # expired, and the person told once
    # Once a second between the two of them, not once a second each (and the first round at once).
    assert 1 <= rounds <= seconds + 2, (rounds, seconds)
