"""The outbox: what the person's assistant writes in their thread also goes to their phone, through the official
twilio library against a Twilio on 127.0.0.1 (tests/providers.py), with retries, never twice for a send the
provider answered, statuses recorded, quiet hours and WhatsApp's window kept."""

import json
import socket
from datetime import time, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.services import profile_of
from channels.adapters.base import StatusUpdate
from channels.models import LinkedAddress, OutboundMessage, OutboundStatus, QuietHours
from channels.outbound import statuses
from channels.outbound.decide import WINDOW_CLOSED
from channels.outbound.sender import Sender
from channels.outbound.text import flatten_markdown
from conversations import outbound
from conversations.models import Endpoint, Message, Role, Source
from conversations.services import conversation_of
from tests.factories import UserFactory
from tests.providers import configure, providers  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

NUMBER = "+14155551234"


@pytest.fixture
def twilio(providers, settings):  # noqa: F811
    """Twilio for SMS and WhatsApp (the other channels configured too, through their own fakes)."""
    configure(settings, providers, "https://assistant.example", whatsapp_through="twilio")
    settings.CHANNEL_RETRY_JITTER = 0
    return providers.twilio


def refuse_next(twilio) -> None:
    twilio.fail_next(
        400, body={"code": 21211, "message": "The 'To' number is not a valid phone number.", "status": 400}
    )


def person(channel: str = "sms", *, wrote_ago: timedelta | None = None, preferred: str = "sms", address: str = NUMBER):
    user = UserFactory()
    profile = profile_of(user)
    profile.channel = preferred
    profile.time_zone = "Europe/Paris"
    profile.save()
    last = None if wrote_ago is None else timezone.now() - wrote_ago
    LinkedAddress.objects.create(user=user, channel=channel, address=address, last_inbound_at=last)
    return user


def assistant_writes(user, text: str, source: str = Source.ASSISTANT) -> Message:
    """What every writer of an assistant message does: the message and the announcement in one transaction."""
    with transaction.atomic():
        message = Message.objects.create(
            conversation=conversation_of(user), role=Role.ASSISTANT, source=source, text=text
        )
        outbound.written([message.pk])
    return message


def send_due() -> int:
    return Sender(concurrency=4).drain()


def test_a_reply_reaches_the_persons_number_flattened_and_its_provider_id_is_kept(twilio):
    user = person()
    message = assistant_writes(user, "**Done.** Deep work 13:00–15:00, see [calendar](https://cal.example/t).")
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.channel, row.address) == (OutboundStatus.QUEUED, "sms", NUMBER)

    assert send_due() == 1
    [created] = twilio.sent
    assert created.address == NUMBER and created.fields["From"] == "+15005550006"
    assert created.text == "Done. Deep work 13:00–15:00, see calendar (https://cal.example/t)."
    assert created.fields["StatusCallback"] == "https://assistant.example/channels/twilio/status"
    row.refresh_from_db()
    assert (row.status, row.provider_message_id, row.attempts) == (OutboundStatus.SENT, created.provider_message_id, 1)
    assert send_due() == 0 and len(twilio.sent) == 1  # sent once


def test_nothing_linked_or_nothing_configured_means_the_thread_only(twilio, settings):
    assistant_writes(UserFactory(), "Hello")
    assert OutboundMessage.objects.count() == 0
    settings.TWILIO_ACCOUNT_SID = ""
    assistant_writes(person(), "Hello")
    assert OutboundMessage.objects.count() == 0


def test_the_persons_own_messages_are_not_sent_back(twilio):
    user = person()
    with transaction.atomic():
        mine = Message.objects.create(conversation=conversation_of(user), role=Role.USER, source=Source.APP, text="x")
        outbound.written([mine.pk])
    assert OutboundMessage.objects.count() == 0


def test_a_long_reply_goes_in_parts_in_order(twilio):
    user = person()
    assistant_writes(user, ("word " * 300).strip() + "\n\n" + ("more " * 300).strip())
    assert send_due() == 2
    bodies = twilio.texts_to(NUMBER)
    assert [b[-6:] for b in bodies] == [" (1/2)", " (2/2)"]
    assert all(len(b) <= 1600 for b in bodies)


def test_a_provider_that_fails_is_retried_with_backoff_and_sends_once(twilio):
    twilio.fail_next(503)
    message = assistant_writes(person(), "Your build is green.")
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.attempts) == (OutboundStatus.QUEUED, 1)
    assert "503" in row.last_error
    assert row.next_attempt_at > timezone.now() + timedelta(seconds=9)  # CHANNEL_RETRY_BASE_SECONDS
    assert send_due() == 0  # not before its time
    OutboundMessage.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    assert send_due() == 1
    row.refresh_from_db()
    assert (row.status, row.attempts) == (OutboundStatus.SENT, 2)
    assert twilio.texts_to(NUMBER) == ["Your build is green."]  # the 503 created nothing; one message


def test_a_provider_that_is_down_is_retried(twilio, settings):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        settings.TWILIO_API_BASE_URL = f"http://127.0.0.1:{unused.getsockname()[1]}"  # nothing listens
        message = assistant_writes(person(), "Hello")
        send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.attempts) == (OutboundStatus.QUEUED, 1)
    assert "did not answer" in row.last_error


def test_a_slow_provider_within_the_timeout_sends_once(twilio):
    twilio.delay = 1.0
    message = assistant_writes(person(), "Hello")
    send_due()
    assert OutboundMessage.objects.get(message=message).status == OutboundStatus.SENT
    assert len(twilio.sent) == 1


def test_a_provider_slower_than_the_timeout_is_the_documented_duplicate(twilio, settings):
    """It may have taken the message: we cannot tell, so it is tried again (docs/explanation/outbox.md)."""
    settings.CHANNEL_TIMEOUT_SECONDS = 0.5
    twilio.delay = 1.0
    message = assistant_writes(person(), "Hello")
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.attempts) == (OutboundStatus.QUEUED, 1)
    assert len(twilio.requests) == 1  # it reached the provider, which took it after we stopped waiting


def test_a_refused_number_fails_at_once(twilio):
    refuse_next(twilio)
    message = assistant_writes(person(), "Hello")
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.attempts) == (OutboundStatus.FAILED, 1)
    assert "21211" in row.last_error


def test_statuses_are_recorded_in_order_and_an_unknown_message_changes_nothing(twilio):
    message = assistant_writes(person(), "Hello")
    send_due()
    sid = twilio.sent[0].provider_message_id
    assert statuses.record([StatusUpdate(sid, "sent"), StatusUpdate(sid, "delivered")]) == 2
    assert statuses.record([StatusUpdate(sid, "sent")]) == 0  # late: never moves back
    assert statuses.record([StatusUpdate("SM" + "f" * 32, "delivered")]) == 0
    row = OutboundMessage.objects.get(message=message)
    assert (row.provider_status, row.shown_status) == ("delivered", "delivered")
    assert statuses.record([StatusUpdate(sid, "undelivered", "30003 Unreachable")]) == 1
    row.refresh_from_db()
    assert (row.provider_status, row.provider_error) == ("undelivered", "30003 Unreachable")


def test_quiet_hours_hold_the_send_and_the_thread_shows_the_message_at_once(twilio):
    user = person()
    now_there = timezone.now().astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
    start = (now_there - timedelta(hours=1)).time().replace(second=0, microsecond=0)
    end = (now_there + timedelta(hours=1)).time().replace(second=0, microsecond=0)
    QuietHours.objects.create(person=user, starts=start, ends=end)
    message = assistant_writes(user, "Reminder: call mum")
    assert Message.objects.filter(pk=message.pk).exists()
    row = OutboundMessage.objects.get(message=message)
    assert row.shown_status == "quiet hours" and row.next_attempt_at > timezone.now() + timedelta(minutes=50)
    assert send_due() == 0 and twilio.sent == []


def test_quiet_hours_that_begin_after_the_queueing_are_read_again_before_sending(twilio):
    user = person()
    message = assistant_writes(user, "Hello")
    QuietHours.objects.create(person=user, starts=time(0, 0), ends=time(23, 59, 59))
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.attempts, row.waiting_for_quiet_hours) == (OutboundStatus.QUEUED, 0, True)
    assert twilio.sent == []


def test_whatsapp_outside_its_window_is_held_and_says_why_then_goes_when_the_person_writes(twilio):
    user = person("whatsapp", wrote_ago=timedelta(hours=30), preferred="whatsapp")
    message = assistant_writes(user, "Your parcel has shipped.")
    send_due()
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.held_reason) == (OutboundStatus.HELD, WINDOW_CLOSED)
    assert twilio.sent == []
    from channels.outbound.queue import release_held

    LinkedAddress.objects.filter(user=user).update(last_inbound_at=timezone.now())
    assert release_held(user.pk, "whatsapp", NUMBER) == 1
    send_due()
    assert twilio.texts_to(NUMBER) == ["Your parcel has shipped."]
    assert twilio.sent[0].fields["To"] == "whatsapp:" + NUMBER


def test_whatsapp_outside_its_window_sends_the_operators_template(twilio, settings):
    settings.TWILIO_WHATSAPP_TEMPLATE_SID = "HX" + "a" * 32
    user = person("whatsapp", wrote_ago=timedelta(hours=30), preferred="whatsapp")
    message = assistant_writes(user, "Your parcel has shipped.")
    send_due()
    [created] = twilio.sent
    assert created.fields["ContentSid"] == "HX" + "a" * 32
    assert json.loads(created.fields["ContentVariables"]) == {"1": "Your parcel has shipped."}
    assert "Body" not in created.fields
    row = OutboundMessage.objects.get(message=message)
    assert (row.status, row.as_template) == (OutboundStatus.SENT, True)


def test_whatsapp_within_its_window_sends_free_text(twilio):
    user = person("whatsapp", wrote_ago=timedelta(hours=2), preferred="sms")
    assistant_writes(user, "Hello")
    send_due()
    assert twilio.sent[0].fields["To"] == "whatsapp:" + NUMBER and twilio.sent[0].text == "Hello"


def test_a_persons_texts_leave_in_order_one_at_a_time(twilio):
    user = person()
    first = assistant_writes(user, "first")
    assistant_writes(user, "second")
    twilio.fail_next(503)
    send_due()
    assert twilio.sent == []  # the first failed; the second waits behind it
    OutboundMessage.objects.filter(message=first).update(next_attempt_at=timezone.now())
    send_due()
    assert twilio.texts_to(NUMBER) == ["first", "second"]


def test_a_writer_whose_transaction_fails_leaves_no_outbox_row(twilio):
    user = person()
    with pytest.raises(RuntimeError), transaction.atomic():
        assistant_writes(user, "never")
        raise RuntimeError
    assert OutboundMessage.objects.count() == 0


def test_a_due_reminder_goes_to_the_phone(twilio):
    from reminders import services as reminders
    from reminders.firing import fire

    user = person()
    reminder = reminders.schedule_reminder(user, "Stretch", "2099-01-01T10:00")
    assert fire(reminder.pk, reminder.next_due_at) == "fired"
    send_due()
    assert twilio.texts_to(NUMBER) == ["Reminder: Stretch"]


def test_a_tools_follow_up_goes_to_the_phone(twilio, client):
    from assistant.models import Action
    from assistant.tools.mcp import new_token_for
    from connections.models import Connection
    from conversations.models import Endpoint
    from ingestion.hotpath.recording import record_user_message
    from tests.conftest import post
    from tests.factories import make_key

    user = person()
    key, _ = make_key(user)
    asked = record_user_message(user=user, endpoint=Endpoint.CURRENT, text="build it", api_key=key)
    reports = Connection.objects.create(owner=user, name="Reports", server_url="https://mcp.example.com/mcp")
    action = Action.objects.create(
        delivery=asked.delivery, kind="mcp", tool="build_report", connection=reports, connection_name="Reports"
    )
    answer = post(
        client, "/api/v1/mcp/callback", new_token_for(action), {"content": "Part 1 is ready.", "hasMore": False}
    )
    assert answer.status_code == 200
    send_due()
    assert "Part 1 is ready." in twilio.texts_to(NUMBER)


def test_the_assistants_reply_to_an_api_message_goes_to_the_phone(twilio, send):
    from tests.factories import make_key

    user = person()
    _, key = make_key(user)
    assert send(key, {"message": "Deploy of shop-api finished"}).status_code == 200
    [reply] = Message.objects.filter(role=Role.ASSISTANT)
    assert OutboundMessage.objects.get().message == reply  # written with the reply
    send_due()
    assert twilio.texts_to(NUMBER) == [flatten_markdown(reply.text)]


@pytest.mark.parametrize("together", [False, True])
def test_replies_recorded_by_one_statement_are_enqueued_in_it(twilio, together):
    """The one writer of "delivered", for one reply or several (one statement on PostgreSQL, the ORM elsewhere)."""
    from delivery import lifecycle
    from ingestion.hotpath.recording import record_user_message

    users = [person(), person(address="+14155550000")]
    for user in users:
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="hello")
    held = [lifecycle.Held(row[0], row[2] if len(row) == 4 else row[1]) for row in lifecycle.claim(10)]
    if together:
        assert len(lifecycle.delivered([(h, f"reply {h.delivery_id}") for h in held])) == 2
    else:
        assert all(lifecycle.delivered([(h, f"reply {h.delivery_id}")]) for h in held)
    replies = Message.objects.filter(role=Role.ASSISTANT)
    assert sorted(OutboundMessage.objects.values_list("message_id", flat=True)) == sorted(r.pk for r in replies)
