"""The library queue that bench/procrastinate_delivery.py measures beside ours is set up as its documentation says:
a job per delivery, written with it, locked by the thread; the thread's jobs fetched one at a time, oldest first,
and a job waiting for its retry keeps its place (docs/benchmarks.md, "A library queue side by side"). The schema
and the trigger are created inside the test's transaction and rolled back with it."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from conversations.models import Endpoint
from tests.factories import UserFactory, make_key

pytest.importorskip("procrastinate", reason="procrastinate (requirements-dev.txt, bench only) is not installed")
pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="procrastinate is a PostgreSQL queue (set DATABASE_URL)"
)


@pytest.fixture
def procrastinate_schema(db):
    from bench.procrastinate_delivery import schema

    with connection.cursor() as cursor:
        for sql in schema():
            cursor.execute(sql)
        cursor.execute("SELECT procrastinate_register_worker_v1()")
        return cursor.fetchone()[0]


def fetch(worker_id: int) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, lock, (args->>'delivery_id')::bigint FROM procrastinate_fetch_job_v2(NULL, %s)", [worker_id]
        )
        job_id, lock, delivery = cursor.fetchone()
    return None if job_id is None else {"id": job_id, "lock": lock, "delivery": delivery}


def finish(job_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT procrastinate_finish_job_v1(%s, 'succeeded', false)", [job_id])


def accept(user, key, text: str) -> int:
    from ingestion.hotpath.recording import record_user_message

    return record_user_message(user=user, endpoint=Endpoint.CURRENT, text=text, api_key=key).delivery.pk


def test_each_accepted_message_gets_one_job_locked_by_its_thread(procrastinate_schema):
    user = UserFactory()
    key, _ = make_key(user, "ci")
    delivery = accept(user, key, "first")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT task_name, queue_name, lock, queueing_lock, (args->>'delivery_id')::bigint FROM procrastinate_jobs"
        )
        jobs = cursor.fetchall()
    assert jobs == [("deliver", "deliveries", f"thread:{user.conversation.pk}", f"delivery:{delivery}", delivery)]


def test_a_thread_s_jobs_come_one_at_a_time_oldest_first_and_a_retry_keeps_its_place(procrastinate_schema):
    worker = procrastinate_schema
    sam, kim = UserFactory(), UserFactory()
    sam_key, kim_key = make_key(sam, "ci")[0], make_key(kim, "ci")[0]
    first, second = accept(sam, sam_key, "one"), accept(sam, sam_key, "two")
    other = accept(kim, kim_key, "hello")

    head = fetch(worker)
    assert head is not None and head["delivery"] == first
    assert fetch(worker)["delivery"] == other  # sam's second waits behind the first, running
    assert fetch(worker) is None

    # The first fails for now: back to todo, due in a minute. Sam's second still waits behind it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT procrastinate_retry_job_v2(%s, %s, NULL, NULL, NULL)",
            [head["id"], timezone.now() + timedelta(minutes=1)],
        )
    assert fetch(worker) is None

    with connection.cursor() as cursor:  # its time has come
        cursor.execute(
            "UPDATE procrastinate_jobs SET scheduled_at = now() - interval '1 second' WHERE id = %s", [head["id"]]
        )
    again = fetch(worker)
    assert again is not None and again["delivery"] == first
    finish(again["id"])
    assert fetch(worker)["delivery"] == second
