"""The worker's own housekeeping (delivery/housekeeping.py): with nothing but `manage.py db_worker` running, an
approval nobody answered expires; with two workers, each job runs in one of them at a time, about once a period."""

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
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


def _server_url() -> str:
    """The test database's server, for a connection of the test's own (another session than Django's)."""
    from django.db import connection

    found = connection.settings_dict
    return f"postgresql://{found['USER']}@{found['HOST']}:{found['PORT'] or 5432}/{found['NAME']}"


def _end_backend_waiting_on(table: str, server: str) -> threading.Thread:
    """End (pg_terminate_backend) the first session that waits for a lock on ``table``, as a restart or failover
    would end it mid-query."""

    def end_it() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            for _ in range(200):
                pid = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    [f"%{table}%"],
                ).fetchone()
                if pid is not None:
                    admin.execute("SELECT pg_terminate_backend(%s)", [pid[0]])
                    return
                time.sleep(0.05)

    thread = threading.Thread(target=end_it, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_connection_ends_midway_is_marked_finished_and_runs_again_a_period_later(user, settings, caplog):
    """The database restarts while a job runs: the run is still marked finished (on a new connection), so the job
    is tried again a period later, not after STALE_SECONDS (approvals that do not expire meanwhile)."""
    if connection.vendor != "postgresql":
        pytest.skip("ends a PostgreSQL backend")
    settings.HOUSEKEEPING_SECONDS = 60
    action = awaiting_approval(user, expires_in=-1)
    server = _server_url()
    with psycopg.connect(server) as holder:  # the job's first read waits behind this lock, and its session ends
        holder.execute(f"LOCK TABLE {Action._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        ender = _end_backend_waiting_on(Action._meta.db_table, server)
        assert housekeeping.run_due(jobs=(EXPIRE,)) == ["expireapprovals"]
        ender.join()
        holder.rollback()
    assert "housekeeping: expireapprovals failed" in caplog.text
    assert HousekeepingRun.objects.get(job="expireapprovals").finished_at is not None

    assert housekeeping.run_due(timezone.now() + timedelta(seconds=61), jobs=(EXPIRE,)) == ["expireapprovals"]
    action.refresh_from_db()
    assert action.state == ActionState.EXPIRED


@pytest.mark.django_db(transaction=True)
def test_a_job_stuck_behind_a_lock_is_cut_off_and_the_other_jobs_run(user, settings, monkeypatch, caplog):
    """A session that holds a lock and never ends (a forgotten transaction) stalls one job's statement: it is
    cancelled after JOB_STATEMENT_SECONDS, logged, and the round goes on, instead of the worker's housekeeping
    hanging for good (and every other worker waiting STALE_SECONDS for the job)."""
    if connection.vendor != "postgresql":
        pytest.skip("holds a PostgreSQL lock")
    if not connection.settings_dict["OPTIONS"].get("server_side_binding"):
        pytest.skip("no limit where a transaction-pooling PgBouncer may be (DATABASE_PREPARED_STATEMENTS off)")
    settings.HOUSEKEEPING_SECONDS = 60
    monkeypatch.setattr(housekeeping, "JOB_STATEMENT_SECONDS", 1)
    awaiting_approval(user, expires_in=-1)
    ran: list[tuple[list[str], str]] = []
    keeper = Housekeeper(jobs=(EXPIRE, Job("prunedevicelogins", 1)))

    def one_round() -> None:
        try:
            done = keeper.tick()
            with connection.cursor() as cursor:  # the limit does not outlive the jobs on the thread's connection
                cursor.execute("SHOW statement_timeout")
                ran.append((done, cursor.fetchone()[0]))
        finally:
            connection.close()

    with psycopg.connect(_server_url()) as holder:
        holder.execute(f"LOCK TABLE {Action._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        round_ = threading.Thread(target=one_round, daemon=True)
        round_.start()
        round_.join(15)
        stuck = round_.is_alive()
        holder.rollback()
    round_.join(15)
    assert not stuck
    assert ran == [(["expireapprovals", "prunedevicelogins"], "0")]
    assert "housekeeping: expireapprovals failed" in caplog.text
    assert HousekeepingRun.objects.filter(finished_at__isnull=True).count() == 0
