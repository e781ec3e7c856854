"""The hand-off through the production task backend (django-tasks-db): the task row is written in the request's
transaction, and `manage.py db_worker` runs it. On SQLite and on PostgreSQL, whichever DATABASE_URL selects."""

import logging

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from conversations.models import Delivery, DeliveryStatus, Message, Role
from delivery.tasks import deliver_message
from tests.conftest import CURRENT, post
from tests.test_webhook_backend import SECRET

DATABASE_BACKEND = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"}


def run_worker(max_tasks: int) -> None:
    """The Procfile's worker, bounded: it stops when the queue is empty or after max_tasks tasks."""
    call_command(
        "db_worker", batch=True, max_tasks=max_tasks, startup_delay=False, reload=False, interval=0, verbosity=0
    )


@pytest.fixture
def database_tasks(settings):
    settings.TASKS = DATABASE_BACKEND


@pytest.mark.django_db
def test_the_task_row_is_written_with_the_message(client, v2, database_tasks):
    post(client, CURRENT, v2[1], {"message": "warm up"})  # first use also writes last_used_at
    with CaptureQueriesContext(connection) as captured:
        assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200

    statements = [q["sql"] for q in captured.captured_queries if q["sql"].split()[0] not in TRANSACTION_CONTROL]
    task_table = connection.ops.quote_name(DBTaskResult._meta.db_table)
    # The key is remembered from the first request: no lookup, its check is part of the write.
    if connection.vendor == "postgresql":  # the message, its delivery and its task: one statement
        assert [s.split()[0] for s in statements] == ["WITH"]
        assert f"INSERT INTO {task_table}" in statements[0]
    else:  # the key's check, then one INSERT each, in one transaction
        assert [s.split()[0] for s in statements] == ["SELECT", "INSERT", "INSERT", "INSERT"]
        assert task_table in statements[3]
    assert DBTaskResult.objects.filter(status="READY").count() == 2
    assert Delivery.objects.filter(status=DeliveryStatus.QUEUED).count() == 2  # nothing ran inside the request


@pytest.mark.django_db
def test_the_request_s_task_row_is_the_one_the_backend_would_write(client, v2, database_tasks):
    """The request writes the task row itself (delivery.tasks.new_task_row); it must stay identical to what
    django-tasks-db's own enqueue writes, whatever version of it is installed."""
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    ours = DBTaskResult.objects.get()
    deliver_message.enqueue(message_id)
    theirs = DBTaskResult.objects.exclude(pk=ours.pk).get()

    compared = [f.attname for f in DBTaskResult._meta.concrete_fields if f.attname not in ("id", "enqueued_at")]
    assert {name: getattr(ours, name) for name in compared} == {name: getattr(theirs, name) for name in compared}
    assert ours.args_kwargs == {"args": [message_id], "kwargs": {}}
    assert ours.task_result.task.func is deliver_message.func


@pytest.mark.django_db(transaction=True)
def test_the_worker_delivers_what_the_request_enqueued(client, v2, database_tasks):
    response = post(client, CURRENT, v2[1], {"message": "Remind me to stretch"})
    assert Delivery.objects.get().status == DeliveryStatus.QUEUED

    run_worker(max_tasks=5)

    delivery = Delivery.objects.select_related("reply").get()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert delivery.message.public_id == response.json()["id"]
    assert Message.objects.get(role=Role.ASSISTANT) == delivery.reply
    assert DBTaskResult.objects.get().status == "SUCCESSFUL"


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
    tasks = DBTaskResult.objects.order_by("enqueued_at")
    assert [t.status for t in tasks] == ["SUCCESSFUL", "SUCCESSFUL"]
    assert tasks[1].run_after >= tasks[0].enqueued_at  # the retry was enqueued deferred, with run_after


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
    assert DBTaskResult.objects.filter(status="READY", run_after=delivery.next_attempt_at).count() == 1


@pytest.mark.django_db
def test_the_enqueued_signal_reaches_its_receivers(client, v2, database_tasks):
    from django.tasks.signals import task_enqueued

    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.args, task_result.task.func))

    task_enqueued.connect(receiver, dispatch_uid="test-enqueued")
    try:
        message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    finally:
        task_enqueued.disconnect(dispatch_uid="test-enqueued")

    assert seen == [(DatabaseBackend, [message_id], deliver_message.func)]


@pytest.mark.django_db
def test_django_s_own_enqueued_log_line_appears_at_debug(client, v2, database_tasks, caplog):
    with caplog.at_level(logging.DEBUG, logger="django.tasks"):
        post(client, CURRENT, v2[1], {"message": "hi"})

    assert any("enqueued" in r.getMessage() and "deliver_message" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_task_enqueued_before_the_public_id_change_still_delivers(client, v2, database_tasks):
    """Tasks written by the previous release carry the delivery's key; a deploy must not strand them."""
    post(client, CURRENT, v2[1], {"message": "hi"})
    DBTaskResult.objects.all().delete()  # as if this release had not enqueued it
    delivery = Delivery.objects.get()
    deliver_message.enqueue(delivery.pk)

    run_worker(max_tasks=5)

    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert DBTaskResult.objects.get().status == "SUCCESSFUL"
