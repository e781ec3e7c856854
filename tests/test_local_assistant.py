"""The default assistant backend: answers in the thread, names the key, summarises the context, takes no action."""

import pytest

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from ingestion.hotpath.recording import record_user_message
from tests.conftest import LEGACY, fixture_body

pytestmark = pytest.mark.django_db


def reply_text() -> str:
    return Message.objects.get(role=Role.ASSISTANT).text


def test_it_answers_in_the_thread_naming_the_key_but_never_its_secret(send, user, v2):
    key, plaintext = v2
    response = send(plaintext, {"message": "Remind me to call Sam at 5pm"})

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.backend) == (DeliveryStatus.DELIVERED, 1, "local")
    assert delivery.started_at <= delivery.finished_at
    reply = delivery.reply
    assert (reply.role, reply.source, reply.conversation) == (Role.ASSISTANT, Source.ASSISTANT, user.conversation)
    assert f"“{key.name}” ({key.hint})" in reply.text
    assert "“Remind me to call Sam at 5pm”" in reply.text
    assert "take no action" in reply.text
    assert plaintext not in reply.text and key.digest not in reply.text
    assert response.json()["id"] == delivery.message.public_id != reply.public_id


def test_it_summarises_the_context_members(send, v2):
    send(v2[1], fixture_body("github_push.json"))

    text = reply_text()
    assert "other members" in text
    assert "repository (an object with" in text
    assert "ref (text “refs/heads/main”)" in text
    assert "You wrote" not in text  # the payload has no message member


def test_it_answers_messages_from_the_legacy_endpoint(send, v1):
    send(v1[1], {"message": "Add milk"}, path=LEGACY)
    assert "old shortcut" in reply_text()


def test_messages_typed_in_the_app_get_the_same_hand_off(user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="Book a table for two")

    assert Delivery.objects.get().status == DeliveryStatus.DELIVERED
    assert reply_text().startswith("Received from the app.")


def test_nothing_is_handed_off_when_the_transaction_rolls_back(user, django_capture_on_commit_callbacks):
    from django.db import transaction

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="never committed")
        raise RuntimeError
    assert callbacks == []
    assert not Message.objects.exists()
