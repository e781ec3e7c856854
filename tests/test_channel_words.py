"""A message the person wrote on a linked channel reaches the assistant as their words only: what our inbound code
attaches (the channel, their address, the provider's message id, the time the provider gives, the media's ids and
links) stays on the message for staff and receipts, and no reply reads it back to them (issue 30: "Received by
Telegram… also carried 5 other members: channel…, providerMessageId…, sentAt…")."""

import pytest
from django.test import Client

from assistant.backends.openai import chat_messages
from assistant.conversation import build_request
from channels.models import LinkedAddress
from conversations.models import Message, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NUMBER = "+14155550134"
OURS = ("channel", "providerMessageId", "sentAt", "other member", NUMBER, "api.twilio.com", "4242")


@pytest.fixture
def client(django_capture_on_commit_callbacks):
    class Committing(Client):
        def generic(self, *args, **kwargs):
            with django_capture_on_commit_callbacks(execute=True):
                return super().generic(*args, **kwargs)

    return Committing()


@pytest.fixture
def person():
    user = UserFactory()
    LinkedAddress.objects.create(user=user, channel="sms", address=NUMBER)
    LinkedAddress.objects.create(user=user, channel="telegram", address="4242")
    return user


def _reply(user) -> str:
    return Message.objects.filter(conversation__user=user, role=Role.ASSISTANT).latest("created_at", "id").text


def _asked(user) -> Message:
    return Message.objects.filter(conversation__user=user, role=Role.USER).latest("created_at", "id")


def test_a_telegram_message_is_answered_without_our_metadata(client, providers, person):
    assert providers.telegram.inbound(4242, "approve").send(client).status_code == 200

    message = _asked(person)
    assert message.context["providerMessageId"] and message.context["channel"] == "telegram"  # kept for staff
    reply = _reply(person)
    assert reply.startswith("Sorry, I didn't understand that.")
    assert not [word for word in OURS if word in reply], reply


def test_an_sms_with_a_photo_is_answered_with_the_photos_kind_only(client, providers, person):
    providers.twilio.inbound(NUMBER, "look at this", media=[("https://api.twilio.com/m/1", "image/png")]).send(client)

    reply = _reply(person)
    assert reply.startswith("Received by SMS. You wrote: “look at this”.")
    assert "It came with 1 attachment (image/png)." in reply
    assert not [word for word in OURS if word in reply], reply


def test_a_model_is_offered_the_persons_words_only(client, providers, person):
    providers.twilio.inbound(NUMBER, "call me back", media=[("https://api.twilio.com/m/1", "image/png")]).send(client)
    message = _asked(person)

    request = build_request(message, 1)
    assert request.context == {"message": "call me back", "attachments": ["image/png"]}
    offered = chat_messages(request)[-1]["content"]
    assert offered.startswith("call me back")
    assert not [word for word in OURS if word in offered], offered


def test_an_api_callers_json_is_still_offered_whole(person):
    from conversations.models import Endpoint
    from ingestion.hotpath.recording import record_user_message

    message = record_user_message(
        user=person, endpoint=Endpoint.CURRENT, text="deploy done", context={"message": "deploy done", "build": 42}
    )
    assert build_request(message, 1).context == {"message": "deploy done", "build": 42}
