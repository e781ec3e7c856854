"""A person deletes their history, or their account, from the console (console/erasure.py): each asks first, takes
a POST with the CSRF token (the account also the password), and deletes in batches, as a task run after run
(docs/howto/use-the-console.md, "Delete your history or your account"); nobody else's rows are touched."""

import io
import math
import re
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import IntegrityError, connection
from django.db.models.signals import pre_delete
from django.tasks import TaskResultStatus
from django.tasks.signals import task_enqueued
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from assistant.models import Action, ToolKind
from console import erasure
from conversations.models import Delivery, DeliveryStatus, Message
from keys.models import ApiKey
from tests.conftest import CURRENT, post
from tests.factories import UserFactory, make_key
from tests.test_task_backends import DATABASE_BACKEND, run_worker

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"  # tests/factories.py's


@pytest.fixture
def history(client, user, settings):
    settings.PRUNE_BATCH_ROWS = 2
    _, plaintext = make_key(user)
    for text in ["one", "two", "three", "on its way"]:
        post(client, CURRENT, plaintext, {"message": text})
    Delivery.objects.exclude(message__text="on its way").update(status=DeliveryStatus.DELIVERED)
    other = UserFactory()
    post(client, CURRENT, make_key(other)[1], {"message": "someone else's"})
    return plaintext


def csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_deleting_the_history_asks_first_needs_the_csrf_token_and_keeps_what_is_on_its_way(user, history):
    client = csrf_client(user)
    page = client.get("/settings/delete-history/").content.decode()
    assert "cannot be undone" in page and "csrfmiddlewaretoken" in page
    assert client.post("/settings/delete-history/").status_code == 403  # no token
    assert Message.objects.filter(conversation__user=user).count() == 4

    token = client.cookies["csrftoken"].value
    response = client.post("/settings/delete-history/", {"csrfmiddlewaretoken": token}, follow=True)

    assert "Deleted 3 messages from your history." in response.content.decode()
    assert list(Message.objects.filter(conversation__user=user).values_list("text", flat=True)) == ["on its way"]
    assert Message.objects.filter(text="someone else's").exists()


def test_deleting_the_account_needs_the_password_then_deletes_everything_of_it(client, user, history):
    client = csrf_client(user)
    client.get("/settings/delete-account/")
    token = client.cookies["csrftoken"].value

    refused = client.post("/settings/delete-account/", {"csrfmiddlewaretoken": token, "password": "wrong"})
    assert refused.status_code == 200 and "That is not your password." in refused.content.decode()
    assert get_user_model().objects.filter(pk=user.pk).exists()

    done = client.post("/settings/delete-account/", {"csrfmiddlewaretoken": token, "password": PASSWORD})

    assert done.status_code == 302
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert not ApiKey.objects.filter(owner_id=user.pk).exists()
    assert list(Message.objects.values_list("text", flat=True)) == ["someone else's"]
    assert post(Client(), CURRENT, history, {"message": "still here?"}).status_code == 401
    assert client.get("/settings/").status_code == 302  # logged out: to the log-in page


@pytest.fixture
def long_history(user, history, settings):
    """Seven delivered messages more than the fixture's: with two a batch and one batch a run, four runs."""
    settings.PRUNE_RUN_SECONDS = 0  # a run stops after its first batch
    conversation = Message.objects.filter(conversation__user=user).first().conversation
    Message.objects.bulk_create(Message(conversation=conversation, text=f"old {n}") for n in range(7))
    return history


@pytest.fixture
def erasure_runs():
    """The erase tasks enqueued while the test runs (the first and each run's next)."""
    runs: list[str] = []

    def record(sender, task_result, **kwargs):
        if task_result.task.name == "erase":
            runs.append(task_result.id)

    task_enqueued.connect(record)
    yield runs
    task_enqueued.disconnect(record)


def message_deletes(captured: CaptureQueriesContext) -> list[tuple[int, int]]:
    """(position, how many ids) of each DELETE from the messages' table among the captured statements."""
    deletes = []
    for position, query in enumerate(captured.captured_queries):
        if re.match(r'DELETE FROM "conversations_message" WHERE', query["sql"]):
            deletes.append((position, len(re.search(r"IN \((.*?)\)", query["sql"]).group(1).split(","))))
    return deletes


def test_a_history_longer_than_a_run_is_deleted_whole_by_runs_of_small_batches(user, long_history, erasure_runs):
    with CaptureQueriesContext(connection) as captured:
        deleted = erasure.delete_history(user)

    assert deleted == 10  # the immediate backend ran every run at once, in this thread
    assert list(Message.objects.filter(conversation__user=user).values_list("text", flat=True)) == ["on its way"]
    assert len(erasure_runs) == 5  # 10 messages, 2 a run: the first run and four more, each enqueued by the one before
    sizes = [size for _, size in message_deletes(captured)]
    assert sum(sizes) == 10 and max(sizes) <= 2


def test_the_history_deleted_is_the_one_asked_about_not_what_a_key_sends_after(user, history):
    asked_about = Message.objects.filter(conversation__user=user).order_by("-pk").values_list("pk", flat=True)[0]
    later = Message.objects.filter(conversation__user=user, text="one").get()
    later.pk, later.public_id, later.text = None, "msg_sent_after_the_request", "sent after"
    later.save()  # a key still sending: a newer row than the request saw, whose delivery is not pending

    assert erasure.erase.call(user.pk, account=False, up_to=asked_about) == 3
    assert sorted(Message.objects.filter(conversation__user=user).values_list("text", flat=True)) == [
        "on its way",
        "sent after",
    ]


def test_the_account_row_goes_only_after_its_messages_each_batch_small(user, long_history):
    with CaptureQueriesContext(connection) as captured:
        assert erasure.delete_account(user) is True

    deletes = message_deletes(captured)
    sizes = [size for _, size in deletes]
    assert sum(sizes) == 11 and max(sizes) <= 2  # every message, in batches; none by the account's cascade
    account_deleted_at = next(
        position
        for position, query in enumerate(captured.captured_queries)
        if query["sql"].startswith('DELETE FROM "auth_user"')
    )
    assert account_deleted_at > max(position for position, _ in deletes)
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert list(Message.objects.values_list("text", flat=True)) == ["someone else's"]


@pytest.mark.django_db(transaction=True)
def test_with_the_database_backend_the_request_closes_the_account_and_the_worker_deletes_it(
    user, long_history, settings
):
    settings.TASKS = DATABASE_BACKEND
    client = csrf_client(user)
    client.get("/settings/delete-account/")
    token = client.cookies["csrftoken"].value

    thread = Message.objects.filter(conversation__user=user)
    kept = thread.count()  # with the assistant's replies: the hand-off runs on commit here
    done = client.post("/settings/delete-account/", {"csrfmiddlewaretoken": token, "password": PASSWORD}, follow=True)

    assert "Your account is closed; it and everything in it are being deleted." in done.content.decode()
    person = get_user_model().objects.get(pk=user.pk)  # closed, its messages still there: nothing ran in the request
    assert not person.is_active and not ApiKey.objects.filter(owner=person, revoked_at__isnull=True).exists()
    assert thread.count() == kept > 11
    assert DBTaskResult.objects.filter(task_path="console.erasure.erase").count() == 1
    assert post(Client(), CURRENT, long_history, {"message": "still here?"}).status_code == 401

    run_worker(max_tasks=20)

    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert not thread.exists() and Message.objects.filter(text="someone else's").exists()
    assert DBTaskResult.objects.filter(task_path="console.erasure.erase").count() == math.ceil(kept / 2)  # 2 a run


def test_a_run_killed_mid_way_is_finished_by_the_next(user, long_history):
    batches: list[int] = []

    def killed_in_the_second_batch(sender, instance, **kwargs):
        batches.append(instance.pk)
        if len(batches) == 3:
            raise RuntimeError("the worker is killed")

    pre_delete.connect(killed_in_the_second_batch, sender=Message)
    try:
        with pytest.raises(ValueError, match="Task failed"):  # the immediate backend: in the request, as a 500
            erasure.delete_history(user)
    finally:
        pre_delete.disconnect(killed_in_the_second_batch, sender=Message)
    assert Message.objects.filter(conversation__user=user).count() == 9  # the first batch only: the second undone

    assert erasure.delete_history(user) == 8  # the form sent again: a run from what is left
    assert erasure.delete_history(user) == 0  # and once more (a double submit): nothing is left to delete
    assert list(Message.objects.filter(conversation__user=user).values_list("text", flat=True)) == ["on its way"]


def test_a_run_whose_worker_was_killed_is_started_again_by_the_housekeeping(user, long_history, settings):
    settings.TASKS = DATABASE_BACKEND
    erasure.delete_account(user)
    killed = DBTaskResult.objects.get(task_path="console.erasure.erase")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    DBTaskResult.objects.filter(pk=killed.pk).update(status=TaskResultStatus.RUNNING, started_at=an_hour_ago)
    erasure.delete_history(UserFactory())  # another person's deletion, running now: left alone
    DBTaskResult.objects.exclude(pk=killed.pk).update(status=TaskResultStatus.RUNNING, started_at=timezone.now())

    call_command("resumeerasures", stdout=io.StringIO())
    call_command("resumeerasures", stdout=io.StringIO())  # the next hour's (or another worker's) finds it started

    rows = DBTaskResult.objects.filter(task_path="console.erasure.erase").order_by("enqueued_at")
    assert [row.status for row in rows] == [TaskResultStatus.FAILED, TaskResultStatus.RUNNING, TaskResultStatus.READY]
    assert rows.last().args_kwargs == killed.args_kwargs  # the same deletion, from what is left


def test_a_second_submit_racing_the_first_finds_the_account_gone_and_deletes_nothing_more(user, history):
    # Two submits of the form (a double click) both pass the password check with the account loaded; the second
    # reaches erasure.delete_account once the first has deleted it, holding the row as it was.
    second_submits_view = get_user_model().objects.get(pk=user.pk)
    erasure.delete_account(user)

    erasure.delete_account(second_submits_view)

    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert list(Message.objects.values_list("text", flat=True)) == ["someone else's"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="a second connection writing while the first deletes")
def test_an_account_deleted_while_the_assistant_still_acts_on_its_messages_is_deleted_whole(user):
    _, key = make_key(user)
    post(Client(), CURRENT, key, {"message": "remind me to stretch at 3pm"})
    worker_got: list[str] = []

    def record(delivery_id: int) -> None:
        """The worker, on its own connection, records a tool call for the delivery."""
        try:
            Action.objects.create(delivery_id=delivery_id, kind=ToolKind.BUILT_IN, tool="create_reminder")
            worker_got.append("recorded")
        except IntegrityError:
            worker_got.append("the delivery is gone")
        finally:
            connection.close()

    def worker_acts_meanwhile(sender, instance, **kwargs):
        """Once the deletion has read the delivery's rows: the worker's write is done or waits for the deletion."""
        worker = threading.Thread(target=record, args=(instance.pk,))
        worker.start()
        workers.append(worker)
        deadline = time.monotonic() + 10
        while worker.is_alive() and not waiting_for_a_lock() and time.monotonic() < deadline:
            time.sleep(0.01)

    workers: list[threading.Thread] = []
    pre_delete.connect(worker_acts_meanwhile, sender=Delivery)
    try:
        erasure.delete_account(user)
    finally:
        pre_delete.disconnect(worker_acts_meanwhile, sender=Delivery)
        for worker in workers:
            worker.join()

    assert worker_got and set(worker_got) == {"the delivery is gone"}
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert not Message.objects.exists() and not Action.objects.exists()


def waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0] > 0
