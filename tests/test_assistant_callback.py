"""POST /api/v1/assistant/replies: a runtime that answered 202 sends the reply later, signed the Standard Webhooks
way with the shared secret. Signatures are made here from the spec, not with our signing module."""

import base64
import hashlib
import hmac
import json
import threading
import time

import pytest

from assistant.signing import secret_bytes
from conversations.models import Delivery, DeliveryStatus, Message, Role
from delivery.engine import deliver_here
from keys.scopes import Scope
from keys.services import set_scopes
from tests.conftest import CURRENT, post
from tests.test_webhook_backend import SECRET

pytestmark = pytest.mark.django_db

REPLIES = "/api/v1/assistant/replies"


def signed_headers(body: bytes, webhook_id: str = "evt_1", timestamp: int | None = None, secret: str = SECRET):
    timestamp = int(time.time()) if timestamp is None else timestamp
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


def call_back(client, body, headers=None, content_type="application/json"):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = signed_headers(raw) if headers is None else headers
    return client.post(REPLIES, data=raw, content_type=content_type, headers=headers)


@pytest.fixture
def runtime(settings, assistant_server):
    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = assistant_server.url
    settings.ASSISTANT_WEBHOOK_KEY = secret_bytes(SECRET)
    return assistant_server


@pytest.fixture
def awaiting(send, runtime, v2):
    """A message the runtime accepted with 202: delivered, its reply to come."""
    runtime.answer(202)
    return send(v2[1], {"message": "Plan my week"}).json()["id"]


def delivery() -> Delivery:
    return Delivery.objects.select_related("reply").get()


def test_a_signed_reply_goes_into_the_thread_and_the_receipt(client, awaiting, v2, user):
    response = call_back(client, {"message_id": awaiting, "reply": "Here is your week: ..."})

    assert response.status_code == 200
    reply = delivery().reply
    assert response.json() == {"success": True, "message": "Reply recorded.", "id": reply.public_id}
    assert (reply.role, reply.text, reply.conversation) == (Role.ASSISTANT, "Here is your week: ...", user.conversation)
    assert delivery().status == DeliveryStatus.DELIVERED
    # the receipt carries the reply only for a key allowed to read it
    set_scopes(v2[0], {*v2[0].scope_set, Scope.REPLIES_READ})
    receipt = client.get(f"/api/v1/inbound/messages/{awaiting}", headers={"Authorization": f"Bearer {v2[1]}"})
    assert receipt.json()["reply"]["text"] == "Here is your week: ..."


def test_a_replayed_callback_changes_nothing(client, awaiting):
    body = json.dumps({"message_id": awaiting, "reply": "once"}).encode()
    headers = signed_headers(body, webhook_id="evt_42")
    first = call_back(client, body, headers)
    again = call_back(client, body, headers)

    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert "already recorded" in again.json()["message"]
    assert Message.objects.filter(role=Role.ASSISTANT).count() == 1


def test_a_second_different_reply_is_a_conflict(client, awaiting):
    call_back(client, {"message_id": awaiting, "reply": "first"})
    body = json.dumps({"message_id": awaiting, "reply": "second"}).encode()
    response = call_back(client, body, signed_headers(body, webhook_id="evt_2"))

    assert (response.status_code, response.json()["code"]) == (409, "reply_already_recorded")
    assert delivery().reply.text == "first"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: {**h, "webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()},
        lambda h, b: {**h, "webhook-id": "evt_other"},  # the signature covers the id
        lambda h, b: {**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) - 1)},  # and the timestamp
        lambda h, b: signed_headers(b, secret="whsec_" + base64.b64encode(b"not-the-shared-secret-at-all!").decode()),
        lambda h, b: {k: v for k, v in h.items() if k != "webhook-signature"},
        lambda h, b: {k: v for k, v in h.items() if k != "webhook-id"},
        lambda h, b: {**h, "webhook-signature": h["webhook-signature"].replace("v1,", "v2,")},
        lambda h, b: {**h, "webhook-timestamp": "soon"},
        # More digits than Python converts to an int (4300): refused as malformed, not a 500.
        lambda h, b: {**h, "webhook-timestamp": "9" * 5000},
        lambda h, b: {},
    ],
)
def test_a_bad_signature_is_refused_and_records_nothing(client, awaiting, tamper):
    body = json.dumps({"message_id": awaiting, "reply": "forged"}).encode()
    response = call_back(client, body, tamper(signed_headers(body), body))

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_signature"
    assert delivery().reply is None


def test_a_changed_body_breaks_the_signature(client, awaiting):
    signed = json.dumps({"message_id": awaiting, "reply": "real"}).encode()
    forged = json.dumps({"message_id": awaiting, "reply": "forged"}).encode()
    response = call_back(client, forged, signed_headers(signed))
    assert (response.status_code, response.json()["code"]) == (401, "invalid_signature")


def test_several_signatures_one_valid_is_accepted(client, awaiting):
    body = json.dumps({"message_id": awaiting, "reply": "rotating secrets"}).encode()
    headers = signed_headers(body)
    headers["webhook-signature"] = "v1,b2xkLXNlY3JldC1zaWduYXR1cmU= " + headers["webhook-signature"]
    assert call_back(client, body, headers).status_code == 200


@pytest.mark.parametrize("skew", [-301, 301, -86400])
def test_a_timestamp_out_of_tolerance_is_refused(client, awaiting, skew):
    body = json.dumps({"message_id": awaiting, "reply": "from the past"}).encode()
    response = call_back(client, body, signed_headers(body, timestamp=int(time.time()) + skew))

    assert (response.status_code, response.json()["code"]) == (401, "timestamp_out_of_tolerance")
    assert "300 seconds" in response.json()["message"]
    assert delivery().reply is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"reply": "no id"}, "message_id"),
        ({"message_id": "msg_x", "reply": "   "}, "reply"),
        ({"message_id": "msg_x", "reply": 5}, "reply"),
        ([1, 2], "object"),
        ({"message_id": "msg_x", "reply": "a\u0000b"}, "NUL"),
    ],
)
def test_a_bad_body_is_400(client, awaiting, body, fragment):
    response = call_back(client, body)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_body")
    assert fragment in response.json()["message"]


def test_invalid_json_is_400_after_the_signature(client, awaiting):
    response = call_back(client, b"{not json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_json")


def test_a_body_that_is_not_json_is_415(client, awaiting):
    body = json.dumps({"message_id": awaiting, "reply": "hi"}).encode()
    response = call_back(client, body, content_type="text/plain")
    assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")


def test_an_unknown_message_is_404(client, runtime):
    response = call_back(client, {"message_id": "msg_" + "Z" * 24, "reply": "hello?"})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_without_a_secret_there_is_no_callback(client, settings, db):
    settings.ASSISTANT_WEBHOOK_KEY = b""
    response = call_back(client, {"message_id": "msg_x", "reply": "hi"})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")


def test_a_reply_during_a_scheduled_retry_delivers_it_and_cancels_the_retry(client, send, runtime, v2):
    answer_now = threading.Event()
    runtime.answer(200, b"", hold=answer_now)  # the runtime got it, but answered too late for us
    runtime.answer(200, {"reply": "must not be sent"})
    from django.conf import settings

    settings.ASSISTANT_TIMEOUT_SECONDS = 1
    try:
        message_id = send(v2[1], {"message": "hi"}).json()["id"]
    finally:
        answer_now.set()
    assert delivery().status == DeliveryStatus.QUEUED

    assert call_back(client, {"message_id": message_id, "reply": "done after all"}).status_code == 200
    assert delivery().status == DeliveryStatus.DELIVERED
    assert deliver_here() == 0  # nothing to attempt
    assert len(runtime.received) == 1


def test_a_reply_that_arrives_before_our_attempt_ends_is_kept(client, v2, runtime):
    """The runtime may call back before its 202 reaches us; the attempt then ends without touching the reply."""
    message_id = post(client, CURRENT, v2[1], {"message": "hi"}).json()["id"]
    Delivery.objects.update(status=DeliveryStatus.PROCESSING, attempts=1)

    assert call_back(client, {"message_id": message_id, "reply": "quick"}).status_code == 200
    from delivery.lifecycle import Held, delivered

    assert not delivered([(Held(delivery().pk, 1), None)])  # the attempt no longer holds it: nothing written
    assert (delivery().status, delivery().reply.text) == (DeliveryStatus.DELIVERED, "quick")
    assert delivery().finished_at is not None
