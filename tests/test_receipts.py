"""GET /api/v1/inbound/messages/{id}: what became of a message, for the key that sent it (who may read what:
tests/test_receipt_access.py)."""

from datetime import UTC, datetime

import pytest

from conversations.models import Delivery, DeliveryStatus, Message, Role
from keys.services import revoke_key
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import UserFactory, attempt_when_due, make_key

pytestmark = pytest.mark.django_db

RECEIPTS = "/api/v1/inbound/messages/"


def stamp(moment: datetime | None) -> str:
    """A recorded time as the receipt writes it: ISO 8601 in UTC, to the microsecond, with the zone as Z."""
    assert moment is not None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def get_receipt(client, key: str | None, message_id: str):
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return client.get(RECEIPTS + message_id, headers=headers)


def test_a_delivered_message_shows_its_status_and_the_reply(client, send, user):
    _, reader = make_key(user, "reads replies", may_read_replies=True)
    message_id = send(reader, {"message": "Remind me to call Sam"}).json()["id"]

    response = get_receipt(client, reader, message_id)

    assert response.status_code == 200
    body = response.json()
    delivery = Delivery.objects.select_related("reply", "message").get()
    assert body == {
        "success": True,
        "message": "Delivered to the assistant, which replied.",
        "id": message_id,
        "status": "delivered",
        "attempts": 1,
        "created_at": stamp(delivery.message.created_at),
        "started_at": stamp(delivery.started_at),
        "finished_at": stamp(delivery.finished_at),
        "next_attempt_at": None,
        "reply": {
            "id": delivery.reply.public_id,
            "text": delivery.reply.text,
            "created_at": stamp(delivery.reply.created_at),
        },
        "actions": [],  # no time said: the local assistant asks when, and calls no tool
    }
    assert body["created_at"] <= body["started_at"] <= body["finished_at"] <= body["reply"]["created_at"]
    assert "last_error" not in body  # staff-only


def test_a_queued_message_has_no_reply_yet(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]  # the hand-off has not run

    body = get_receipt(client, v2[1], message_id).json()
    assert (body["status"], body["attempts"], body["started_at"]) == ("queued", 0, None)
    assert body["message"] == "Queued for the assistant."


def test_a_retry_and_a_failure_are_told_without_the_internal_error(client, send, v2, settings, assistant_server):
    from assistant.signing import secret_bytes
    from tests.test_webhook_backend import SECRET

    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = assistant_server.url
    settings.ASSISTANT_WEBHOOK_KEY = secret_bytes(SECRET)
    settings.ASSISTANT_MAX_ATTEMPTS = 2
    assistant_server.answer(503, b"internal detail")
    assistant_server.answer(503, b"internal detail")
    message_id = send(v2[1], {"message": "hi"}).json()["id"]

    retrying = get_receipt(client, v2[1], message_id).json()
    assert (retrying["status"], retrying["attempts"]) == ("queued", 1)
    assert retrying["next_attempt_at"] is not None
    assert "another attempt" in retrying["message"]

    attempt_when_due(Delivery.objects.get().pk)
    failed = get_receipt(client, v2[1], message_id)
    assert (failed.json()["status"], failed.json()["attempts"]) == ("failed", 2)
    assert "internal detail" not in failed.content.decode()


def test_the_sending_key_once_revoked_may_not_read_it(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    assert get_receipt(client, v2[1], message_id).status_code == 200
    revoke_key(v2[0])

    refused = get_receipt(client, v2[1], message_id)
    assert (refused.status_code, refused.json()["code"]) == (401, "revoked_api_key")


def test_the_legacy_endpoint_gives_an_id_its_v1_key_can_look_up(client, v1):
    message_id = post(client, LEGACY, v1[1], {"message": "hi"}).json()["id"]
    assert get_receipt(client, v1[1], message_id).json()["status"] == "queued"


def test_another_accounts_message_is_not_found(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "private"}).json()["id"]
    _, stranger = make_key(UserFactory(), "someone else")

    response = get_receipt(client, stranger, message_id)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert response.json()["success"] is False
    assert "private" not in response.content.decode()


@pytest.mark.parametrize("message_id", ["msg_" + "A" * 24, "msg_short", "1", "../../admin", "msg_" + "é" * 24])
def test_unknown_or_malformed_ids_are_not_found(client, v2, message_id):
    response = get_receipt(client, v2[1], message_id)
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_a_reply_id_is_not_a_receipt(client, send, v2):
    send(v2[1], {"message": "hi"})
    reply = Message.objects.get(role=Role.ASSISTANT)
    assert get_receipt(client, v2[1], reply.public_id).status_code == 404


@pytest.mark.parametrize(("key", "code"), [(None, "missing_authorization"), ("psk_nope", "invalid_api_key")])
def test_it_needs_a_valid_key(client, v2, key, code):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    response = get_receipt(client, key, message_id)
    assert (response.status_code, response.json()["code"]) == (401, code)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_only_reads(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    response = post(client, RECEIPTS + message_id, v2[1], {"message": "x"})
    assert (response.status_code, response.json()["code"]) == (405, "method_not_allowed")
    # The text names what the endpoint takes, not the message endpoints' POST.
    assert "Send a GET" in response.json()["message"]
    assert "POST with a JSON body" not in response.json()["message"]


@pytest.mark.parametrize("may_read_replies", [False, True])
def test_a_receipt_costs_two_queries_three_for_a_reader(client, user, django_assert_num_queries, may_read_replies):
    _, key = make_key(user, "script", may_read_replies=may_read_replies)
    message_id = post(client, CURRENT, key, {"message": "hi"}).json()["id"]
    # The key with its owner; the message with its delivery (and reply); for a reader, the reply's actions too.
    with django_assert_num_queries(3 if may_read_replies else 2):
        assert get_receipt(client, key, message_id).status_code == 200


def test_statuses_read_as_sentences(client, v2):
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    Delivery.objects.update(status=DeliveryStatus.PROCESSING, attempts=1)
    assert get_receipt(client, v2[1], message_id).json()["message"] == "Being handed to the assistant now."
    Delivery.objects.update(status=DeliveryStatus.DELIVERED)
    assert "reply has not arrived yet" in get_receipt(client, v2[1], message_id).json()["message"]
