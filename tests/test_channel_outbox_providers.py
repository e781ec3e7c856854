"""The outbox end to end for every provider, not only Twilio: the assistant replies in the person's thread, the reply
goes through the outbox to the provider on 127.0.0.1 (tests/providers.py) as that provider documents its send, and
the provider's delivery statuses, posted to our callback as it posts them, are recorded on the message (Meta's
``statuses`` webhook, BlueBubbles' ``updated-message`` events; Telegram reports none).

And WhatsApp's 24-hour window through Meta's Cloud API: outside it, the operator's approved template (a ``template``
message, the text as the body's one parameter), or, without one, the text held."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import profile_of
from channels.adapters import configured
from channels.adapters.base import Channel, SendError
from channels.models import LinkedAddress, OutboundMessage, OutboundStatus
from channels.outbound.decide import WINDOW_CLOSED
from channels.outbound.sender import Sender
from channels.outbound.text import flatten_markdown
from conversations.models import Message, Role
from delivery.queue_worker import settle
from tests.factories import UserFactory, make_key
from tests.providers import WHATSAPP_ACCESS_TOKEN, WHATSAPP_PHONE_NUMBER_ID

pytestmark = pytest.mark.django_db

NUMBER = "+14155551234"
CHAT = "532817164"
TEMPLATE = "assistant_message"


def linked_person(channel: str, address: str, *, wrote_ago: timedelta | None = timedelta(hours=1)):
    user = UserFactory()
    profile = profile_of(user)
    profile.channel = channel if channel != "telegram" else "sms"
    profile.save()
    last = None if wrote_ago is None else timezone.now() - wrote_ago
    LinkedAddress.objects.create(user=user, channel=channel, address=address, last_inbound_at=last)
    return user


def reply_in_thread(send, user, text: str = "Deploy of shop-api finished") -> Message:
    """A script posts to api-message; the built-in assistant replies in the thread, and the reply is in the outbox."""
    _, key = make_key(user)
    assert send(key, {"message": text}).status_code == 200
    [reply] = Message.objects.filter(conversation__user=user, role=Role.ASSISTANT)
    assert OutboundMessage.objects.filter(message=reply).exists()
    return reply


def send_due() -> int:
    return Sender(concurrency=2).drain()


def outbox_row(reply: Message) -> OutboundMessage:
    return OutboundMessage.objects.get(message=reply)


# --- Each provider, the whole way ----------------------------------------------------------------------------------


def test_whatsapp_cloud_reply_goes_out_as_meta_documents_and_its_statuses_come_back(client, providers, send):
    user = linked_person("whatsapp", NUMBER)
    reply = reply_in_thread(send, user)
    assert send_due() == 1

    [path, headers, _] = providers.whatsapp.requests[-1]
    assert path == f"/{WHATSAPP_PHONE_NUMBER_ID}/messages"
    assert headers["authorization"] == f"Bearer {WHATSAPP_ACCESS_TOKEN}"
    assert headers["content-type"].startswith("application/json")
    [sent] = providers.whatsapp.sent
    assert sent.fields == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": NUMBER.removeprefix("+"),
        "type": "text",
        "text": {"preview_url": False, "body": flatten_markdown(reply.text)},
    }
    row = outbox_row(reply)
    assert (row.status, row.provider_message_id) == (OutboundStatus.SENT, sent.provider_message_id)
    assert not row.as_template

    for word in ("sent", "delivered", "read"):
        answer = providers.whatsapp.status(sent.provider_message_id, word).send(client)
        assert answer.status_code == 200
    row.refresh_from_db()
    assert (row.provider_status, row.shown_status) == ("read", "read")


def test_whatsapp_cloud_failure_status_is_recorded_with_metas_error(client, providers, send):
    reply = reply_in_thread(send, linked_person("whatsapp", NUMBER))
    send_due()
    wamid = providers.whatsapp.sent[0].provider_message_id
    assert providers.whatsapp.status(wamid, "failed", error_code=131026).send(client).status_code == 200
    row = outbox_row(reply)
    assert row.provider_status == "failed" and row.provider_error.startswith("131026")


def test_imessage_reply_goes_to_bluebubbles_and_its_updated_message_events_come_back(client, providers, send):
    user = linked_person("imessage", NUMBER, wrote_ago=None)
    reply = reply_in_thread(send, user)
    assert send_due() == 1

    [path, _, _] = providers.bluebubbles.requests[-1]
    assert path.startswith("/api/v1/message/text?password=")
    [sent] = providers.bluebubbles.sent
    assert sent.fields["chatGuid"] == f"iMessage;-;{NUMBER}"
    assert sent.fields["message"] == flatten_markdown(reply.text)
    assert sent.fields["tempGuid"] == f"{reply.public_id}-1"  # our stable reference: a resend is recognisable
    row = outbox_row(reply)
    assert (row.status, row.provider_message_id) == (OutboundStatus.SENT, sent.provider_message_id)

    assert providers.bluebubbles.updated(sent.provider_message_id, delivered=True).send(client).status_code == 200
    row.refresh_from_db()
    assert row.provider_status == "delivered"
    update = providers.bluebubbles.updated(sent.provider_message_id, delivered=True, read=True)
    assert update.send(client).status_code == 200
    row.refresh_from_db()
    assert (row.provider_status, row.shown_status) == ("read", "read")


def test_an_imessage_that_bluebubbles_reports_as_an_error_is_shown_failed(client, providers, send):
    reply = reply_in_thread(send, linked_person("imessage", NUMBER, wrote_ago=None))
    send_due()
    guid = providers.bluebubbles.sent[0].provider_message_id
    assert providers.bluebubbles.updated(guid, delivered=False, error=22).send(client).status_code == 200
    row = outbox_row(reply)
    assert (row.provider_status, row.provider_error) == ("failed", "BlueBubbles error 22")


def test_telegram_reply_goes_to_the_chat_and_stays_sent_without_statuses(providers, send):
    user = linked_person("telegram", CHAT, wrote_ago=None)
    reply = reply_in_thread(send, user)
    assert send_due() == 1

    [path, _, _] = providers.telegram.requests[-1]
    assert path.endswith("/sendMessage")
    [sent] = providers.telegram.sent
    assert sent.fields == {"chat_id": int(CHAT), "text": flatten_markdown(reply.text)}
    row = outbox_row(reply)
    assert (row.status, row.provider_message_id) == (OutboundStatus.SENT, sent.provider_message_id)
    assert (row.provider_status, row.shown_status) == ("", "sent")  # Telegram reports no delivery statuses


@pytest.mark.parametrize(
    ("channel", "address"),
    [("whatsapp", NUMBER), ("imessage", NUMBER), ("telegram", CHAT)],
)
def test_a_provider_that_is_down_is_retried_then_sent_once(providers, send, channel, address):
    provider = {"whatsapp": providers.whatsapp, "imessage": providers.bluebubbles, "telegram": providers.telegram}[
        channel
    ]
    provider.fail_next(503)
    reply = reply_in_thread(send, linked_person(channel, address))
    send_due()
    row = outbox_row(reply)
    assert (row.status, row.attempts) == (OutboundStatus.QUEUED, 1) and "503" in row.last_error
    OutboundMessage.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    send_due()
    row.refresh_from_db()
    assert (row.status, row.attempts) == (OutboundStatus.SENT, 2)
    assert len(provider.sent) == 1


def test_a_status_for_a_message_no_row_holds_changes_nothing(client, providers, send):
    reply = reply_in_thread(send, linked_person("whatsapp", NUMBER))
    send_due()
    assert providers.whatsapp.status("wamid.HBgLunknown", "delivered").send(client).status_code == 200
    assert outbox_row(reply).provider_status == ""


# --- WhatsApp's 24-hour window through the Cloud API ---------------------------------------------------------------


def test_outside_the_window_without_a_template_the_cloud_api_text_is_held(providers, send, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = ""
    reply = reply_in_thread(send, linked_person("whatsapp", NUMBER, wrote_ago=timedelta(hours=30)))
    send_due()
    row = outbox_row(reply)
    assert (row.status, row.held_reason) == (OutboundStatus.HELD, WINDOW_CLOSED)
    assert providers.whatsapp.sent == []


def test_outside_the_window_the_cloud_api_sends_the_operators_template(client, providers, send, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = TEMPLATE
    settings.WHATSAPP_CLOUD_TEMPLATE_LANGUAGE = "en_US"
    providers.whatsapp.approve_template(TEMPLATE, "en_US", parameters=1)
    reply = reply_in_thread(send, linked_person("whatsapp", NUMBER, wrote_ago=timedelta(hours=30)))
    assert send_due() == 1

    [sent] = providers.whatsapp.sent
    assert sent.fields == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": NUMBER.removeprefix("+"),
        "type": "template",
        "template": {
            "name": TEMPLATE,
            "language": {"code": "en_US"},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": flatten_markdown(reply.text)}]}],
        },
    }
    row = outbox_row(reply)
    assert (row.status, row.as_template, row.provider_message_id) == (
        OutboundStatus.SENT,
        True,
        sent.provider_message_id,
    )
    assert providers.whatsapp.status(sent.provider_message_id, "delivered").send(client).status_code == 200
    row.refresh_from_db()
    assert row.provider_status == "delivered"


def test_within_the_window_free_text_goes_even_with_a_template_configured(providers, send, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = TEMPLATE
    providers.whatsapp.approve_template(TEMPLATE, "en_US", parameters=1)
    reply_in_thread(send, linked_person("whatsapp", NUMBER, wrote_ago=timedelta(hours=23)))
    send_due()
    assert providers.whatsapp.sent[0].fields["type"] == "text"


def test_a_template_meta_does_not_know_fails_the_send_with_metas_reason(providers, send, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = "not_approved"
    reply = reply_in_thread(send, linked_person("whatsapp", NUMBER, wrote_ago=timedelta(hours=30)))
    send_due()
    row = outbox_row(reply)
    assert row.status == OutboundStatus.FAILED  # it never will succeed: the operator must fix the setting
    assert "132001" in row.last_error or "does not exist" in row.last_error
    assert providers.whatsapp.sent == []


def test_a_long_text_is_cut_to_what_one_template_parameter_holds(providers, send, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = TEMPLATE
    providers.whatsapp.approve_template(TEMPLATE, "en_US", parameters=1)
    adapter = configured()[Channel.WHATSAPP]
    adapter.send_template(NUMBER, "word " * 400, reference="msg_x-1")
    [parameter] = providers.whatsapp.sent[0].fields["template"]["components"][0]["parameters"]
    assert len(parameter["text"]) <= 1024 and parameter["text"].endswith("…")


# --- The adapters' template capability -----------------------------------------------------------------------------


def test_only_whatsapp_adapters_with_a_template_configured_can_send_one(providers, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = ""
    assert not any(adapter.can_send_template() for adapter in configured().values())
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = TEMPLATE
    assert {name for name, adapter in configured().items() if adapter.can_send_template()} == {"whatsapp"}


def test_twilio_sends_its_template_through_the_adapter(providers, settings):
    from tests.providers import configure

    configure(settings, providers, "https://assistant.example", whatsapp_through="twilio")
    settings.TWILIO_WHATSAPP_TEMPLATE_SID = "HX" + "b" * 32
    adapters = configured()
    assert adapters["whatsapp"].can_send_template() and not adapters["sms"].can_send_template()
    sent = adapters["whatsapp"].send_template(NUMBER, "Your parcel has shipped.", reference="msg_x-1")
    [created] = providers.twilio.sent
    assert created.provider_message_id == sent.provider_message_id
    assert (created.fields["To"], created.fields["ContentSid"]) == ("whatsapp:" + NUMBER, "HX" + "b" * 32)
    assert created.fields["StatusCallback"] == "https://assistant.example/channels/twilio/status"


@pytest.mark.parametrize("channel", ["imessage", "telegram"])
def test_channels_without_templates_refuse_to_send_one(providers, channel):
    adapter = configured()[channel]
    assert not adapter.can_send_template()
    with pytest.raises(SendError) as refused:
        adapter.send_template(NUMBER, "hello", reference="msg_x-1")
    assert not refused.value.retryable


# --- A timeout is "unknown", not "failed" (channels/adapters/unknown.py) ---------------------------------------------


def _due_now(row: OutboundMessage) -> None:
    OutboundMessage.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())


def test_twilio_answering_after_the_timeout_ends_with_one_copy(providers, send, settings):
    """The review's case (Twilio answering after 5 s, CHANNEL_TIMEOUT_SECONDS=3: three copies), at a third of the
    scale: the attempt times out, the retry waits, asks Twilio's Messages list, finds the text and sends nothing."""
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    providers.twilio.late = 1.7
    reply = reply_in_thread(send, linked_person("sms", NUMBER))

    send_due()
    row = outbox_row(reply)
    assert (row.status, row.attempts) == (OutboundStatus.QUEUED, 1) and "did not answer" in row.last_error
    assert row.next_attempt_at >= timezone.now() + timedelta(seconds=25)  # waits for Twilio to be done with it
    (taken,) = providers.twilio.sent

    _due_now(row)
    send_due()
    row.refresh_from_db()
    assert (row.status, row.attempts, row.provider_message_id) == (OutboundStatus.SENT, 2, taken.provider_message_id)
    assert providers.twilio.texts_to(NUMBER) == [row.text]  # one copy
    listed = [path for path, _headers, body in providers.twilio.requests if "Messages.json?" in path]
    assert len(listed) == 1 and "To=%2B14155551234" in listed[0] and "DateSent%3E=" in listed[0]


def test_the_running_worker_reads_the_unknown_outcome_at_the_claim_and_sends_no_second_copy(providers, send, settings):
    """The worker's own path (its claim, its hand-over to a send thread), not ``drain``: the earlier attempt's unknown
    outcome is read for the whole claim before the send thread starts, and the send thread asks Twilio first."""
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    providers.twilio.late = 1.7
    reply = reply_in_thread(send, linked_person("sms", NUMBER))
    send_due()
    row = outbox_row(reply)
    (taken,) = providers.twilio.sent

    _due_now(row)
    sender = Sender(concurrency=2)
    claims = sender.kind.claim(5)
    sender._hand_over(claims)
    finished = sender._finished.get(timeout=10)
    assert settle(sender.kind, finished) == "written"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.provider_message_id) == (OutboundStatus.SENT, 2, taken.provider_message_id)
    assert providers.twilio.texts_to(NUMBER) == [row.text]  # one copy


def test_twilio_that_never_took_the_timed_out_attempt_gets_the_text_once(providers, send, settings):
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    providers.twilio.fail_next(503, delay=1.5)  # answers late, and took nothing
    reply = reply_in_thread(send, linked_person("sms", NUMBER))

    send_due()
    row = outbox_row(reply)
    assert row.status == OutboundStatus.QUEUED and not providers.twilio.sent
    _due_now(row)
    send_due()
    row.refresh_from_db()
    assert row.status == OutboundStatus.SENT
    assert providers.twilio.texts_to(NUMBER) == [row.text]


def test_a_twilio_list_that_fails_sends_nothing_and_asks_again(providers, send, settings):
    """Resending without knowing could duplicate: when the lookup itself fails, the send waits for the next try."""
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    providers.twilio.late = 1.5
    reply = reply_in_thread(send, linked_person("sms", NUMBER))
    send_due()
    row = outbox_row(reply)
    settings.TWILIO_AUTH_TOKEN = "wrong"  # the list answers 401
    _due_now(row)
    send_due()
    row.refresh_from_db()
    assert row.status == OutboundStatus.QUEUED and "could not say whether an earlier attempt arrived" in row.last_error
    assert len(providers.twilio.sent) == 1


@pytest.mark.parametrize(("channel", "address"), [("whatsapp", NUMBER), ("telegram", CHAT), ("imessage", NUMBER)])
def test_without_a_lookup_a_timed_out_send_goes_again_as_documented(providers, send, settings, channel, address):
    """Meta, Telegram and BlueBubbles offer no way to ask: one extra copy per attempt that timed out after the provider
    took it (the figure in docs/explanation/limits.md)."""
    provider = {"whatsapp": providers.whatsapp, "imessage": providers.bluebubbles, "telegram": providers.telegram}[
        channel
    ]
    settings.CHANNEL_TIMEOUT_SECONDS = 1
    provider.late = 1.5
    reply = reply_in_thread(send, linked_person(channel, address))
    send_due()
    row = outbox_row(reply)
    assert row.status == OutboundStatus.QUEUED
    assert row.next_attempt_at >= timezone.now() + timedelta(seconds=25)
    provider.late = 0
    _due_now(row)
    send_due()
    row.refresh_from_db()
    assert row.status == OutboundStatus.SENT
    assert len(provider.sent) == 2
