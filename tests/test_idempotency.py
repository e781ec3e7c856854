"""Idempotency-Key (docs/design.md#idempotency): retries get the first response and record nothing new."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from io import StringIO

import psycopg
import psycopg.types.json
import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from conversations.models import Delivery, Message
from ingestion.idempotency import request_digest
from ingestion.models import IdempotencyRecord
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db

BODY = {"message": "Deploy finished", "run": 77}


def send(client, key, body=BODY, idempotency_key="run-77", path=CURRENT):
    return post(client, path, key, body, **{"Idempotency-Key": idempotency_key})


def test_a_retry_replays_the_first_response_and_records_nothing(client, v2):
    first = send(client, v2[1])
    retry = send(client, v2[1])

    assert first.status_code == retry.status_code == 200
    assert retry.json() == first.json()
    assert retry["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Message.objects.count() == Delivery.objects.count() == 1


def test_the_record_keeps_a_digest_and_the_response_never_the_body(client, v2):
    send(client, v2[1])
    record = IdempotencyRecord.objects.get()

    assert (record.api_key, record.key, record.response_status) == (v2[0], "run-77", 200)
    message_id = Message.objects.get().public_id  # the replayed response names the same message
    assert record.response_body == {"success": True, "message": "Message sent successfully", "id": message_id}
    assert record.request_digest == request_digest("api_message", BODY)
    assert "Deploy finished" not in str(record.__dict__)


def test_the_same_body_with_members_reordered_is_the_same_request(client, v2):
    send(client, v2[1], {"run": 77, "message": "Deploy finished"})
    assert send(client, v2[1])["Idempotent-Replayed"] == "true"


def test_a_different_body_with_the_same_key_is_422(client, v2):
    send(client, v2[1])
    reused = send(client, v2[1], {"message": "Something else"})

    assert reused.status_code == 422
    assert reused.json()["code"] == "idempotency_key_reused"
    assert reused.json()["success"] is False
    assert Message.objects.count() == 1


def test_keys_are_scoped_to_the_api_key(client, user, v2):
    _, other = make_key(user, "another automation")
    send(client, v2[1])
    assert "Idempotent-Replayed" not in send(client, other)
    assert Message.objects.count() == 2


def test_different_idempotency_keys_are_different_messages(client, v2):
    send(client, v2[1], idempotency_key="a")
    send(client, v2[1], idempotency_key="b")
    assert Message.objects.count() == 2


def test_a_request_that_failed_leaves_nothing_to_replay(client, v2):
    failed = send(client, v2[1], {"message": "   "})
    assert failed.status_code == 400
    assert not IdempotencyRecord.objects.exists()

    assert send(client, v2[1]).status_code == 200
    assert Message.objects.count() == 1


def test_the_legacy_endpoint_replays_its_full_response(client, v1):
    first = send(client, v1[1], {"message": "hi"}, path=LEGACY)
    retry = send(client, v1[1], {"message": "hi"}, path=LEGACY)

    assert retry.json() == first.json()
    assert retry.json()["phoneNumber"] == "+14155551234"
    assert retry["Idempotent-Replayed"] == "true"
    assert "Deprecation" in retry
    assert Message.objects.count() == 1


def test_an_expired_key_can_be_used_again(client, v2, settings):
    send(client, v2[1])
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=25))

    again = send(client, v2[1], {"message": "A new day"})
    assert again.status_code == 200
    assert "Idempotent-Replayed" not in again
    assert Message.objects.count() == 2
    assert IdempotencyRecord.objects.get().request_digest == request_digest("api_message", {"message": "A new day"})


def test_a_record_still_in_flight_is_409(client, v2):
    # Committed rows always hold the response; one without it can only be mid-transaction elsewhere.
    IdempotencyRecord.objects.create(api_key=v2[0], key="run-77", request_digest=request_digest("api_message", BODY))
    busy = send(client, v2[1])
    assert busy.status_code == 409
    assert busy.json()["code"] == "idempotency_in_progress"
    assert not Message.objects.exists()


def other_connection():
    database = connection.settings_dict
    return psycopg.connect(
        host=database["HOST"], port=database["PORT"] or 5432, user=database["USER"],
        password=database["PASSWORD"], dbname=database["NAME"], autocommit=False,
    )  # fmt: skip


FIRST_ANSWER = {"success": True, "message": "Message sent successfully", "id": "msg_" + "f" * 28}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="another connection's open transaction: PostgreSQL's")
@pytest.mark.django_db(transaction=True)  # the first request's row must be another transaction's, uncommitted
@pytest.mark.parametrize("remembered", [True, False], ids=["fast path", "full path"])
@pytest.mark.parametrize("first_commits", [True, False], ids=["first commits", "first fails"])
def test_a_retry_while_the_first_is_in_flight_waits_for_it(client, v2, remembered, first_commits):
    """It waits for the first's row: then gets the first's response, or is recorded itself if the first failed."""
    if remembered:
        assert post(client, CURRENT, v2[1], {"message": "remember the key"}).status_code == 200
    with other_connection() as other:
        other.execute(
            "INSERT INTO ingestion_idempotencyrecord (api_key_id, key, request_digest, response_status, response_body,"
            " created_at) VALUES (%s, 'run-77', %s, 200, %s, now())",
            [v2[0].pk, request_digest("api_message", BODY), psycopg.types.json.Jsonb(FIRST_ANSWER)],
        )
        finish = other.commit if first_commits else other.rollback
        threading.Timer(0.5, finish).start()
        started = time.monotonic()
        retry = send(client, v2[1])
        waited = time.monotonic() - started
    assert waited >= 0.4
    assert retry.status_code == 200
    recorded = Message.objects.filter(text="Deploy finished")
    if first_commits:
        assert (retry.json(), retry["Idempotent-Replayed"]) == (FIRST_ANSWER, "true")
        assert not recorded.exists()
    else:
        assert "Idempotent-Replayed" not in retry
        assert retry.json()["id"] == recorded.get().public_id


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's test database is one connection")
@pytest.mark.django_db(transaction=True)  # each thread's request commits on its own connection
@pytest.mark.parametrize("remembered", [True, False], ids=["fast path", "full path"])
def test_simultaneous_requests_with_one_key_record_one_message(v2, remembered):
    if remembered:
        assert post(Client(), CURRENT, v2[1], {"message": "remember the key"}).status_code == 200
    start = threading.Barrier(8)

    def one_request(_: int) -> tuple[int, dict, bool]:
        start.wait()
        try:
            response = send(Client(), v2[1])
            return response.status_code, response.json(), "Idempotent-Replayed" in response
        finally:
            connections.close_all()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one_request, range(8)))
    message = Message.objects.get(text="Deploy finished")
    assert [(status, body["id"]) for status, body, _ in answers] == [(200, message.public_id)] * 8
    assert sum(not replayed for _, _, replayed in answers) == 1


@pytest.mark.parametrize(
    "value",
    ["", "x" * 256, "caf\u00e9", "tab\there", "bell\x07", "del\x7f"],
)
def test_an_invalid_idempotency_key_is_400(client, v2, value):
    refused = send(client, v2[1], idempotency_key=value)
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid_idempotency_key"
    assert not Message.objects.exists()


@pytest.mark.parametrize("value", ["a", "x" * 255, "550e8400-e29b-41d4-a716-446655440000", "with space ~!@#"])
def test_valid_idempotency_keys_are_accepted(client, v2, value):
    assert send(client, v2[1], idempotency_key=value).status_code == 200


def test_the_prune_command_deletes_only_expired_records(client, v2):
    send(client, v2[1], idempotency_key="old")
    send(client, v2[1], idempotency_key="new")
    IdempotencyRecord.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    out = StringIO()
    call_command("pruneidempotencykeys", stdout=out)
    assert "Deleted 1 " in out.getvalue()
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["new"]
    assert Message.objects.count() == 2  # messages stay; only the replay records go
