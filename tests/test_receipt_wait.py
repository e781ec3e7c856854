"""GET /api/v1/inbound/messages/{id}?wait=N: the answer in one call, as soon as the message is final
(ingestion/listing.py). How many may wait at once: RECEIPT_WAIT_SLOTS."""

import logging
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.models import Delivery
from ingestion import listing
from tests.conftest import CURRENT, post
from tests.factories import attempt_when_due, make_key

RECEIPTS = "/api/v1/inbound/messages/"


def receipt(client, key: str, message_id: str, wait: str):
    return client.get(RECEIPTS + message_id, {"wait": wait}, headers={"Authorization": f"Bearer {key}"})


def finish_later(delivery_id: int, after: float) -> threading.Thread:
    """The worker's attempt, on another thread (its own database connection), ``after`` seconds from now."""

    def attempt() -> None:
        time.sleep(after)
        try:
            attempt_when_due(delivery_id)
        finally:
            connection.close()

    thread = threading.Thread(target=attempt)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_waiting_receipt_answers_as_soon_as_the_reply_is_in(client, user, settings):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # attempted below
    _, key = make_key(user, "asks", may_read_replies=True)
    message_id = post(client, CURRENT, key, {"message": "Remind me to call Sam"}).json()["id"]
    worker = finish_later(Delivery.objects.get().pk, after=0.5)

    started = time.monotonic()
    response = receipt(client, key, message_id, "10")
    took = time.monotonic() - started
    worker.join()

    assert response.status_code == 200
    assert response.json()["status"] == "delivered"
    assert response.json()["reply"]["text"]
    assert 0.5 <= took < 3, took  # as soon as it was final (1 s back-off at most), not the 10 s asked


@pytest.mark.django_db
def test_a_message_that_stays_queued_is_answered_when_the_wait_is_over(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]

    started = time.monotonic()
    response = receipt(client, v2[1], message_id, "0.6")

    assert 0.6 <= time.monotonic() - started < 2.5
    assert response.json()["status"] == "queued"


@pytest.mark.django_db
def test_a_final_message_is_answered_at_once(client, send, user):
    _, key = make_key(user, "asks")
    message_id = send(key, {"message": "hi"}).json()["id"]

    started = time.monotonic()
    response = receipt(client, key, message_id, "30")

    assert time.monotonic() - started < 1
    assert response.json()["status"] == "delivered"


@pytest.mark.django_db
@pytest.mark.parametrize("wait", ["31", "-1", "soon", "nan", "inf"])
def test_a_wait_out_of_range_is_a_json_error(client, v2, wait):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]

    response = receipt(client, v2[1], message_id, wait)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_parameter"
    assert "30" in response.json()["message"]


@pytest.mark.django_db
def test_with_every_slot_taken_a_wait_is_refused_at_once_for_next_to_nothing(client, v2, settings):
    settings.RECEIPT_WAIT_SLOTS = 1
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    assert listing._slots.take()  # another request is waiting
    try:
        with CaptureQueriesContext(connection) as queries:
            refused = receipt(client, v2[1], message_id, "5")
        without_wait = client.get(RECEIPTS + message_id, headers={"Authorization": f"Bearer {v2[1]}"})
    finally:
        listing._slots.give_back()

    assert refused.status_code == 503
    assert refused.json()["code"] == "receipt_waits_busy"
    assert refused["Retry-After"] == "5"
    assert len(queries) == 0  # not even the key's lookup
    assert without_wait.json()["status"] == "queued"  # reading without waiting is unaffected


@pytest.mark.django_db
def test_a_busy_refusal_is_flow_control_not_a_server_error_in_the_log(client, v2, settings, caplog):
    # django.request logs every other 5xx as an error (and Sentry makes each an event): callers polling a busy
    # process would flood both. The access line records the refusal.
    settings.RECEIPT_WAIT_SLOTS = 1
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    assert listing._slots.take()
    try:
        refused = receipt(client, v2[1], message_id, "5")
    finally:
        listing._slots.give_back()

    assert refused.status_code == 503
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.django_db
def test_a_slot_taken_between_the_glance_and_the_wait_answers_at_once_with_retry_after(client, v2, settings):
    settings.RECEIPT_WAIT_SLOTS = 1
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    original = listing._Slots.full
    listing._Slots.full = lambda self: False  # type: ignore[method-assign]  # the glance saw a free slot
    assert listing._slots.take()
    try:
        response = receipt(client, v2[1], message_id, "5")
    finally:
        listing._Slots.full = original  # type: ignore[method-assign]
        listing._slots.give_back()

    assert response.status_code == 200
    assert response["Retry-After"] == "5"
    assert response.json()["status"] == "queued"
