"""ASSISTANT_BACKEND=webhook against a real HTTP server on 127.0.0.1 that checks the Standard Webhooks signature
itself (independently of our signing module) and answers as a runtime would, well or badly."""

import base64
import hashlib
import hmac
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from assistant.signing import secret_bytes
from conversations.models import Delivery, DeliveryStatus, Message, Role
from delivery.lifecycle import policy
from tests.conftest import fixture_body
from tests.factories import attempt_when_due

pytestmark = pytest.mark.django_db

SECRET = "whsec_" + base64.b64encode(b"assistant-runtime-shared-secret-32b").decode()


def signature_is_valid(received, secret: str = SECRET) -> bool:
    """The receiving side of Standard Webhooks, written from the spec."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{received.headers['webhook-id']}.{received.headers['webhook-timestamp']}.".encode() + received.body
    expected = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return expected in received.headers["webhook-signature"].split(" ")


@pytest.fixture
def runtime(settings, assistant_server):
    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = assistant_server.url + "/hooks/assistant"
    settings.ASSISTANT_WEBHOOK_KEY = secret_bytes(SECRET)
    settings.ASSISTANT_TIMEOUT_SECONDS = 2  # a slow answer is held (servers.Answer.hold), never raced
    settings.ASSISTANT_MAX_ATTEMPTS = 3
    settings.ASSISTANT_RETRY_BASE_SECONDS = 30
    return assistant_server


def delivery() -> Delivery:
    return Delivery.objects.select_related("message", "reply").get()


def seconds_until(moment) -> float:
    return (moment - timezone.now()).total_seconds()


def test_it_posts_the_signed_message_and_records_the_reply(send, runtime, user, v2):
    key, plaintext = v2
    runtime.answer(200, {"reply": "Done: I will remind you at 5pm."})
    body = {"message": "Remind me at 5pm", "source": "cron"}
    send(plaintext, body)

    [received] = runtime.received
    assert received.path == "/hooks/assistant"
    assert signature_is_valid(received)
    assert not signature_is_valid(received, "whsec_" + base64.b64encode(b"some-other-secret-of-32-bytes!!").decode())
    assert abs(int(received.headers["webhook-timestamp"]) - time.time()) < 5
    sent = delivery().message
    assert received.headers["webhook-id"] == sent.public_id
    event = received.json()
    assert event["type"] == "message.received"
    data = event["data"]
    assert data["message"]["id"] == sent.public_id
    assert (data["message"]["text"], data["message"]["context"]) == ("Remind me at 5pm", body)
    assert data["key"] == {"id": key.pk, "name": "github actions", "hint": key.hint}
    assert data["user"] == {"id": user.pk}
    assert data["thread"][-1]["id"] == sent.public_id
    assert data["attempt"] == 1
    wire = received.body.decode() + repr(received.headers)
    assert plaintext not in wire and key.digest not in wire

    assert delivery().status == DeliveryStatus.DELIVERED
    assert delivery().reply.text == "Done: I will remind you at 5pm."
    assert delivery().reply.role == Role.ASSISTANT


def test_the_thread_sent_holds_the_earlier_messages_and_replies(send, runtime, v2):
    runtime.answer(200, {"reply": "first answer"})
    runtime.answer(200, {"reply": "second answer"})
    send(v2[1], {"message": "first"})
    send(v2[1], {"message": "second"})

    thread = runtime.received[1].json()["data"]["thread"]
    assert [(entry["role"], entry["text"]) for entry in thread] == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second"),
    ]


def test_the_thread_is_capped(send, runtime, v2, settings):
    settings.ASSISTANT_THREAD_MESSAGES = 2
    for n in range(3):
        runtime.answer(200, {"reply": f"answer {n}"})
        send(v2[1], {"message": f"message {n}"})
    thread = runtime.received[-1].json()["data"]["thread"]
    assert [entry["text"] for entry in thread] == ["answer 1", "message 2"]


@pytest.mark.parametrize("answer", [(202, b""), (200, b""), (202, b'{"status": "accepted"}'), (200, b"{}")])
def test_an_answer_without_a_reply_means_the_reply_comes_later(send, runtime, v2, answer):
    runtime.answer(answer[0], answer[1])
    send(v2[1], {"message": "Plan my week"})

    assert delivery().status == DeliveryStatus.DELIVERED
    assert delivery().reply is None
    assert not Message.objects.filter(role=Role.ASSISTANT).exists()


def test_a_5xx_is_retried_with_exponential_backoff_then_fails(send, runtime, v2, settings):
    settings.ASSISTANT_RETRY_JITTER = 0  # exact waits (the jitter has its own test)
    for _ in range(3):
        runtime.answer(503, b"runtime restarting")
    send(v2[1], {"message": "Water the plants"})

    first = delivery()
    assert (first.status, first.attempts) == (DeliveryStatus.QUEUED, 1)
    assert 28 < seconds_until(first.next_attempt_at) <= 30
    assert "HTTP 503" in first.last_error and "runtime restarting" in first.last_error

    assert attempt_when_due(first.pk) == "queued"
    second = delivery()
    assert second.attempts == 2
    assert 58 < seconds_until(second.next_attempt_at) <= 60  # doubled

    assert attempt_when_due(first.pk) == "failed"
    last = delivery()
    assert (last.status, last.attempts, last.next_attempt_at) == (DeliveryStatus.FAILED, 3, None)
    assert "Gave up after 3 attempts" in last.last_error
    assert last.message.text == "Water the plants"  # the message is never lost
    # The same webhook-id on every attempt lets the runtime drop duplicates; the attempt number says which.
    assert {r.headers["webhook-id"] for r in runtime.received} == {last.message.public_id}
    assert [r.json()["data"]["attempt"] for r in runtime.received] == [1, 2, 3]


def test_the_backoff_is_capped(send, runtime, v2, settings):
    settings.ASSISTANT_MAX_ATTEMPTS = 10
    settings.ASSISTANT_RETRY_MAX_SECONDS = 100
    settings.ASSISTANT_RETRY_JITTER = 0
    for _ in range(4):
        runtime.answer(500)
    send(v2[1], {"message": "hi"})
    for _ in range(3):
        attempt_when_due(delivery().pk)
    assert 98 < seconds_until(delivery().next_attempt_at) <= 100  # 30, 60, 120 → capped at 100


def test_the_waits_are_spread_at_random_below_the_exponential_one(settings):
    settings.ASSISTANT_RETRY_BASE_SECONDS, settings.ASSISTANT_RETRY_JITTER = 30, 0.2
    waits = [policy().backoff_seconds(2) for _ in range(500)]  # 60 s without jitter

    assert all(48 <= wait <= 60 for wait in waits)
    assert max(waits) - min(waits) > 6  # spread over the band, not one value
    assert len({round(wait, 3) for wait in waits}) > 100


def test_a_timeout_is_retried(send, runtime, v2):
    answer_now = threading.Event()
    runtime.answer(200, {"reply": "too late"}, hold=answer_now)  # answers only when released (or after 10 s)
    try:
        send(v2[1], {"message": "hi"})  # returns with the runtime still holding its answer: the client gave up

        assert delivery().status == DeliveryStatus.QUEUED
        assert delivery().last_error == "No response within 2 seconds."
        assert delivery().reply is None
        assert len(runtime.received) == 1
    finally:
        answer_now.set()


def test_a_refused_connection_is_retried(send, runtime, v2, settings):
    runtime.shutdown()
    runtime.server_close()
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.QUEUED
    assert delivery().last_error.startswith("Could not connect")
    assert "127.0.0.1" not in delivery().last_error  # no URL in errors


def test_429_waits_as_long_as_the_runtime_asks(send, runtime, v2):
    runtime.answer(429, b"slow down", Retry_After="120")
    send(v2[1], {"message": "hi"})

    assert delivery().status == DeliveryStatus.QUEUED
    assert 118 < seconds_until(delivery().next_attempt_at) <= 120


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_a_4xx_fails_at_once(send, runtime, v2, status):
    runtime.answer(status, b'{"error": "unknown user"}')
    send(v2[1], {"message": "hi"})

    assert (delivery().status, delivery().attempts) == (DeliveryStatus.FAILED, 1)
    assert f"HTTP {status}" in delivery().last_error


def test_a_redirect_is_not_followed(send, runtime, v2):
    runtime.answer(307, b"", Location="http://127.0.0.1:9/elsewhere")
    send(v2[1], {"message": "hi"})

    assert len(runtime.received) == 1
    assert delivery().status == DeliveryStatus.FAILED
    assert "HTTP 307" in delivery().last_error


@pytest.mark.parametrize(
    "body",
    [
        b"<html>ok</html>",
        b"[1, 2]",
        b'{"reply": 5}',
        b'{"reply": "   "}',
        b'{"reply": ["a"]}',
        b"\xff\xfe",
        b'{"reply": "a\\u0000b"}',  # a NUL, which PostgreSQL cannot store
        b'{"reply": "\\ud800 hi"}',  # a lone surrogate, which no database can store as UTF-8
    ],
)
def test_a_malformed_reply_fails_without_retrying(send, runtime, v2, body):
    runtime.answer(200, body)
    send(v2[1], fixture_body("monitoring_alert.json"))

    assert (delivery().status, delivery().attempts) == (DeliveryStatus.FAILED, 1)
    assert delivery().reply is None
    assert "not" in delivery().last_error


def test_a_new_round_after_failure_can_succeed(send, runtime, v2):
    from delivery.tasks import retry_delivery

    runtime.answer(400)
    send(v2[1], {"message": "hi"})
    assert delivery().status == DeliveryStatus.FAILED

    runtime.answer(200, {"reply": "got it this time"})
    assert retry_delivery(delivery())
    attempt_when_due(delivery().pk)  # the immediate backend runs on commit; here we run the attempt ourselves
    assert (delivery().status, delivery().attempts) == (DeliveryStatus.DELIVERED, 1)
    assert delivery().reply.text == "got it this time"
    assert delivery().finished_at - delivery().started_at < timedelta(seconds=5)
