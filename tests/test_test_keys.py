"""Test keys (keys/models.py ``test_mode``; docs/howto/keys-and-scopes.md#test-keys): same format as any key; their
messages are accepted and answered, kept apart from the person's thread, and no tool acts, nothing is texted and no
approval is asked. Marked wherever the key is shown; receipts say the message was a test."""

import io

import pytest
from django.core.management import call_command
from django.db import connection

from assistant.conversation import recent_thread
from assistant.models import Action
from assistant.tools.toolbox import toolbox_for
from channels.models import OutboundMessage
from conversations.models import Delivery, Message, Role
from delivery import lifecycle
from keys import tokens
from keys.models import ApiKey, Generation
from keys.services import create_key
from reminders.models import Reminder
from tests.conftest import CURRENT, post
from tests.console import DEFAULT_SCOPES, form_nonce
from tests.providers import configure, providers  # noqa: F401  (the fixture)
from tests.test_channel_outbox import NUMBER, person, send_due

pytestmark = pytest.mark.django_db


@pytest.fixture
def twilio(providers, settings):  # noqa: F811
    configure(settings, providers, "https://assistant.example", whatsapp_through="twilio")
    return providers.twilio


def test_a_test_keys_message_is_answered_apart_with_no_tool_no_text_and_no_approval(twilio, send, client):
    user = person()
    _, plaintext = create_key(user, "ci check", test_mode=True, may_read_replies=True)
    _, live_plaintext = create_key(user, "nightly", may_read_replies=True, tools_need_approval=True)

    response = send(plaintext, {"message": "Remind me to stretch at 3pm tomorrow"})

    assert response.status_code == 200 and response.json()["success"] is True
    message = Message.objects.get(public_id=response.json()["id"])
    reply = Delivery.objects.get(message=message).reply
    assert message.test and reply is not None and reply.test  # recorded apart, and answered
    assert not Reminder.objects.exists()  # no tool acted
    # What the assistant wanted is on the receipt, refused; nothing waits for the person's approval.
    assert [(a.tool, a.state, a.is_error) for a in Action.objects.all()] == [("schedule_reminder", "done", True)]
    assert "test message" in reply.text
    send_due()
    assert twilio.texts_to(NUMBER) == []  # nothing texted
    receipt = client.get(
        f"/api/v1/inbound/messages/{message.public_id}", headers={"Authorization": f"Bearer {plaintext}"}
    )
    assert receipt.json()["test"] is True and receipt.json()["reply"]["text"] == reply.text

    # The same words with the ordinary key: a tool is wanted and the person is asked (and texted).
    live_response = send(live_plaintext, {"message": "Remind me to stretch at 3pm tomorrow"})
    live_receipt = client.get(
        f"/api/v1/inbound/messages/{live_response.json()['id']}", headers={"Authorization": f"Bearer {live_plaintext}"}
    )
    assert "test" not in live_receipt.json()
    assert Action.objects.filter(state="awaiting_approval").exists()
    assert OutboundMessage.objects.exists()


def test_the_thread_and_the_assistants_history_leave_test_messages_out(client, send, user):
    _, plaintext = create_key(user, "ci check", test_mode=True)
    _, live = create_key(user, "nightly")
    send(plaintext, {"message": "a test from CI"})
    real_id = send(live, {"message": "the real one"}).json()["id"]

    client.force_login(user)
    page = client.get("/conversation/").content.decode()
    assert "the real one" in page and "a test from CI" not in page
    history = recent_thread(Message.objects.get(public_id=real_id))
    assert [entry.text for entry in history if entry.role == Role.USER] == ["the real one"]
    assert all(not m.test for m in Message.objects.filter(public_id__in=[e.id for e in history]))


def test_the_toolbox_of_a_test_message_is_empty(user, settings, client):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}  # not attempted yet
    _, plaintext = create_key(user, "ci check", test_mode=True, tools_need_approval=False)
    post(client, CURRENT, plaintext, {"message": "hi"})
    delivery = Delivery.objects.select_related("message__api_key", "message__trigger").get()

    assert toolbox_for(user, delivery, 1).tools == {}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the replies' one-statement SQL is PostgreSQL's")
def test_a_reply_recorded_by_one_statement_is_a_test_reply_too(user, settings, client):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    _, plaintext = create_key(user, "ci check", test_mode=True)
    post(client, CURRENT, plaintext, {"message": "hi"})
    (row,) = lifecycle.claim(10)
    held = lifecycle.Held(row[0], row[1])
    assert lifecycle.delivered([(held, "hello")]) == {held.delivery_id}

    assert Message.objects.get(role=Role.ASSISTANT).test


def test_a_test_key_has_the_same_format_as_any_key(user):
    key, plaintext = create_key(user, "ci check", test_mode=True)

    presented = tokens.recognise(plaintext)
    assert presented is not None and presented.generation == Generation.V2
    assert key.hint == tokens.hint(plaintext)


def test_createapikey_test_makes_a_test_key(db):
    out = io.StringIO()
    call_command(
        "createapikey", "--email", "ci@example.com", "--name", "ci", "--test", stdout=out, stderr=io.StringIO()
    )

    key = ApiKey.objects.get()
    assert key.test_mode
    assert "Created test V2 key 'ci'" in out.getvalue()
    assert tokens.digest(out.getvalue().strip().splitlines()[-1]) == key.digest


def test_the_console_makes_and_marks_a_test_key(client, user, admin_client):
    client.force_login(user)
    form = {"name": "ci check", "nonce": form_nonce(client, "/keys/new/"), **DEFAULT_SCOPES, "test_mode": "on"}
    response = client.post("/keys/new/", form)

    key = ApiKey.objects.get()
    assert key.test_mode
    assert "data-test-key" in response.content.decode()  # the page that shows the secret once
    assert "data-test-key" in client.get("/keys/").content.decode()
    assert "data-test-key-note" in client.get(f"/keys/{key.pk}/").content.decode()
    admin_list = admin_client.get("/admin/keys/apikey/").content.decode()
    assert "column-test_mode" in admin_list


def test_the_admin_marks_test_messages(admin_client, send, user):
    _, plaintext = create_key(user, "ci check", test_mode=True)
    send(plaintext, {"message": "a test from CI"})

    page = admin_client.get("/admin/conversations/message/?test__exact=1").content.decode()
    assert "a test from CI" in page and "column-test" in page


def test_an_ordinary_key_is_not_marked(client, user):
    client.force_login(user)
    client.post("/keys/new/", {"name": "nightly", "nonce": form_nonce(client, "/keys/new/"), **DEFAULT_SCOPES})

    assert not ApiKey.objects.get().test_mode
    assert "data-test-key" not in client.get("/keys/").content.decode()
