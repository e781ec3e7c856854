"""A person deletes their history, or their account, from the console (console/erasure.py): each asks first, takes
a POST with the CSRF token (the account also the password), and deletes in batches; nobody else's rows are touched."""

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection
from django.db.models.signals import pre_delete
from django.test import Client

from assistant.models import Action, ToolKind
from console import erasure
from conversations.models import Delivery, DeliveryStatus, Message
from keys.models import ApiKey
from tests.conftest import CURRENT, post
from tests.factories import UserFactory, make_key

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
