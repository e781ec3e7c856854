"""The hand-off with the production task backend (TASK_BACKEND=database): the delivery row, written with the
message, is the delivery queue's entry (delivery/queue.py), and `manage.py db_worker` delivers it (delivery/engine.py)
and still runs ordinary django.tasks tasks. On SQLite and on PostgreSQL, whichever DATABASE_URL selects; the
concurrency of real worker processes is tests/test_delivery_engine.py's (PostgreSQL)."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.tasks import task
from django.test.utils import CaptureQueriesContext
from django_tasks_db.models import DBTaskResult

from conversations.models import Delivery, DeliveryStatus, Message, Role
from delivery.tasks import deliver_message
from tests.conftest import CURRENT, post
from tests.test_webhook_backend import SECRET

DATABASE_BACKEND = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"}


def run_worker(max_tasks: int) -> None:
    """The Procfile's worker, bounded: it delivers what is due, runs the ready tasks and stops."""
    call_command(
        "db_worker", batch=True, max_tasks=max_tasks, startup_delay=False, reload=False, interval=0, verbosity=0
    )


@task
def remember(text: str) -> str:
    """An ordinary task, such as a reminder: the worker that delivers messages still runs these."""
    return text.upper()


@pytest.fixture
def database_tasks(settings):
    settings.TASKS = DATABASE_BACKEND


@pytest.mark.django_db
def test_the_message_and_its_queued_delivery_are_written_together(client, v2, database_tasks):
    post(client, CURRENT, v2[1], {"message": "warm up"})  # first use also writes last_used_at
    with CaptureQueriesContext(connection) as captured:
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200

    statements = [q["sql"] for q in captured.captured_queries if q["sql"].split()[0] not in TRANSACTION_CONTROL]
    # The key is remembered from the first request: no lookup, its check is part of the write.
    if connection.vendor == "postgresql":  # the message and its delivery: one statement
        assert [s.split()[0] for s in statements] == ["WITH"]
    else:  # the key's check, then one INSERT each, in one transaction
        assert [s.split()[0] for s in statements] == ["SELECT", "INSERT", "INSERT"]
    assert not DBTaskResult.objects.exists()  # no task row: the delivery is the queue's entry
    delivery = Delivery.objects.select_related("message").latest("pk")
    assert delivery.status == DeliveryStatus.QUEUED  # nothing ran inside the request
    assert delivery.conversation_id == delivery.message.conversation_id  # its thread, for the order


@pytest.mark.django_db(transaction=True)
def test_the_worker_delivers_what_the_request_enqueued(client, v2, database_tasks):
    response = post(client, CURRENT, v2[1], {"message": "Remind me to stretch"})
    assert Delivery.objects.get().status == DeliveryStatus.QUEUED

    run_worker(max_tasks=5)

    delivery = Delivery.objects.select_related("reply").get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert delivery.message.public_id == response.json()["id"]
    assert Message.objects.get(role=Role.ASSISTANT) == delivery.reply
    assert (delivery.lease_expires_at, delivery.finished_at is not None) == (None, True)


@pytest.mark.django_db(transaction=True)
def test_the_worker_runs_a_deferred_retry(client, v2, database_tasks, settings, assistant_server):
    from assistant.signing import secret_bytes

    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = assistant_server.url
    settings.ASSISTANT_WEBHOOK_KEY = secret_bytes(SECRET)
    settings.ASSISTANT_RETRY_BASE_SECONDS = 0  # due at once, so the bounded worker picks the retry up
    assistant_server.answer(503)
    assistant_server.answer(200, {"reply": "second time lucky"})
    post(client, CURRENT, v2[1], {"message": "hi"})

    run_worker(max_tasks=5)

    delivery = Delivery.objects.select_related("reply").get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 2)
    assert delivery.reply.text == "second time lucky"
    assert "HTTP 503" in delivery.last_error  # the last error stays for staff


@pytest.mark.django_db(transaction=True)
def test_a_later_retry_waits_for_its_time(client, v2, database_tasks, settings, assistant_server):
    from assistant.signing import secret_bytes

    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = assistant_server.url
    settings.ASSISTANT_WEBHOOK_KEY = secret_bytes(SECRET)
    assistant_server.answer(503)
    post(client, CURRENT, v2[1], {"message": "hi"})

    run_worker(max_tasks=5)  # runs the first attempt; the retry is 30 s away, so the batch ends

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.QUEUED, 1)
    assert len(assistant_server.received) == 1
    assert delivery.next_attempt_at is not None and delivery.lease_expires_at is None


@pytest.mark.django_db(transaction=True)
def test_task_rows_written_by_an_earlier_release_deliver_once(client, v2, database_tasks):
    """Before the delivery rows became the queue, each message had a task row (carrying its public id, or earlier
    its delivery's key); after a deploy those tasks run and do nothing, and the engine delivers each message once."""
    first = post(client, CURRENT, v2[1], {"message": "one"}).json()["id"]
    post(client, CURRENT, v2[1], {"message": "two"})
    deliver_message.enqueue(first)
    deliver_message.enqueue(Delivery.objects.latest("pk").pk)

    run_worker(max_tasks=5)

    assert [(d.status, d.attempts) for d in Delivery.objects.order_by("pk")] == [(DeliveryStatus.DELIVERED, 1)] * 2
    assert [t.return_value for t in DBTaskResult.objects.all()] == ["skipped", "skipped"]


@pytest.mark.django_db(transaction=True)
def test_the_worker_still_runs_ordinary_tasks(database_tasks):
    result = remember.enqueue("water the plants")

    run_worker(max_tasks=5)

    assert DBTaskResult.objects.get(pk=result.id).return_value == "WATER THE PLANTS"


@pytest.mark.django_db(transaction=True)
def test_only_tasks_runs_only_the_tasks(client, v2, database_tasks):
    post(client, CURRENT, v2[1], {"message": "hi"})
    result = remember.enqueue("stretch")

    call_command("worker", batch=True, only="tasks", startup_delay=False, reload=False, interval=0, verbosity=0)

    assert DBTaskResult.objects.get(pk=result.id).status == "SUCCESSFUL"
    assert Delivery.objects.get().status == DeliveryStatus.QUEUED
