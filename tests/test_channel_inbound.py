"""The providers' callbacks under /channels/: each provider's request (built and signed by the fake provider, as the
provider builds and signs it) lands in the linked person's thread exactly as a typed message; forged, replayed,
oversized, non-UTF-8 or mistyped requests are refused clearly and record nothing; unknown senders get one short
answer a day and no thread."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from channels.models import InboundEvent, LinkedAddress, LinkHint
from conversations.models import Delivery, Message, Role, Source
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NUMBER = "+14155550134"
STRANGER = "+14155550199"


@pytest.fixture
def client(django_capture_on_commit_callbacks):
    """Django's test client, running what each request's commit triggers, as a real request does: the hand-off to
    the assistant (the immediate task backend) and the notices to unknown senders."""

    class Committing(Client):
        def generic(self, *args, **kwargs):
            with django_capture_on_commit_callbacks(execute=True):
                return super().generic(*args, **kwargs)

    return Committing()


@pytest.fixture
def person():
    user = UserFactory()
    for channel in ("sms", "whatsapp", "imessage"):
        LinkedAddress.objects.create(user=user, channel=channel, address=NUMBER)
    LinkedAddress.objects.create(user=user, channel="telegram", address="4242")
    return user


def _thread(user):
    return list(Message.objects.filter(conversation__user=user, role=Role.USER).order_by("created_at", "id"))


def test_an_sms_from_a_linked_number_lands_in_the_thread_as_if_typed(client, providers, person):
    response = providers.twilio.inbound(
        NUMBER, "Book a table for two", media=[("https://api.twilio.com/m/1", "image/png")]
    ).send(client)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/xml") and b"<Response" in response.content
    (message,) = _thread(person)
    assert (message.text, message.source) == ("Book a table for two", Source.SMS)
    assert message.context["from"] == NUMBER
    assert message.context["media"] == [{"url": "https://api.twilio.com/m/1", "contentType": "image/png"}]
    delivery = Delivery.objects.get(message=message)  # the same hand-off as a typed message
    assert delivery.endpoint == "channel"
    assert LinkedAddress.objects.get(user=person, channel="sms").last_inbound_at is not None
    # The default assistant answered in the thread, saying how the message arrived.
    reply = Message.objects.get(conversation__user=person, role=Role.ASSISTANT)
    assert reply.text.startswith("Received by SMS.")


def test_the_thread_page_shows_the_channel(client, providers, person):
    providers.twilio.inbound(NUMBER, "from my phone").send(client)
    client.force_login(person)
    page = client.get("/conversation/").content.decode()
    assert "from my phone" in page and f"SMS from {NUMBER}" in page


def test_a_retried_callback_records_nothing_twice(client, providers, person):
    callback = providers.twilio.inbound(NUMBER, "once")
    assert callback.send(client).status_code == 200
    assert callback.send(client).status_code == 200
    assert [m.text for m in _thread(person)] == ["once"]
    assert InboundEvent.objects.count() == 1


def test_a_retry_is_answered_200_saying_it_was_a_duplicate(client, providers, person):
    callback = providers.telegram.inbound(4242, "once")
    assert callback.send(client).json() == {"success": True, "recorded": 1, "duplicates": 0}
    assert callback.send(client).json() == {"success": True, "recorded": 0, "duplicates": 1}
    assert [m.text for m in _thread(person)] == ["once"]


def test_whatsapp_through_twilio_lands_as_whatsapp(client, providers, settings, person):
    from tests.providers import configure

    configure(settings, providers, "http://testserver", whatsapp_through="twilio")
    assert providers.twilio.inbound(NUMBER, "via whatsapp", whatsapp=True).send(client).status_code == 200
    (message,) = _thread(person)
    assert message.source == Source.WHATSAPP and message.context["profileName"] == "Test Person"


@pytest.mark.parametrize(
    "forge",
    [
        lambda p: p.twilio.signed(
            "/channels/twilio/inbound", {"From": NUMBER, "Body": "x", "MessageSid": "SM" + "1" * 32}, token="guess"
        ),
        lambda p: p.whatsapp.event(
            {"messages": [{"from": NUMBER[1:], "id": "wamid.1", "type": "text", "text": {"body": "x"}}]}, secret="guess"
        ),
        lambda p: p.telegram.update(
            {"update_id": 9, "message": {"chat": {"id": 4242, "type": "private"}, "text": "x"}}, secret="guess"
        ),
        lambda p: p.telegram.update(
            {"update_id": 9, "message": {"chat": {"id": 4242, "type": "private"}, "text": "x"}}, secret=""
        ),
        lambda p: p.bluebubbles.event(
            "new-message", {"guid": "g", "text": "x", "handle": {"address": NUMBER}}, secret="guess"
        ),
        lambda p: p.bluebubbles.event(
            "new-message", {"guid": "g", "text": "x", "handle": {"address": NUMBER}}, secret=""
        ),
    ],
)
def test_a_forged_callback_is_refused_and_records_nothing(client, providers, person, forge):
    response = forge(providers).send(client)
    assert response.status_code == 403
    assert response.json()["code"] == "invalid_channel_signature"
    assert _thread(person) == [] and InboundEvent.objects.count() == 0


def test_a_twilio_callback_without_its_signature_header_is_refused(client, providers, person):
    callback = providers.twilio.inbound(NUMBER, "hi")
    callback.headers = {}
    assert callback.send(client).status_code == 403
    assert _thread(person) == []


def test_a_signed_body_that_was_altered_is_refused(client, providers, person):
    callback = providers.whatsapp.inbound(NUMBER, "hi")
    callback.body = callback.body.replace(b'"hi"', b'"hj"')
    assert callback.send(client).status_code == 403
    assert _thread(person) == []


def test_an_oversized_body_is_refused_unread(client, providers, settings, person):
    settings.CHANNEL_MAX_BODY_BYTES = 1000
    response = providers.twilio.inbound(NUMBER, "x" * 2000).send(client)
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
    assert _thread(person) == []


def test_a_body_that_is_not_utf8_is_a_clear_400(client, providers, person):
    twilio = providers.twilio.inbound(NUMBER, "hi")
    twilio.body = twilio.body.replace(b"Body=hi", b"Body=%FF")
    assert twilio.send(client).status_code in (400, 403)  # not readable, or not what Twilio signed: never a 500
    telegram = providers.telegram.inbound(4242, "hi")
    telegram.body = telegram.body.replace(b'"hi"', b'"\xff"')
    response = telegram.send(client)
    assert response.status_code == 400 and response.json()["code"] == "invalid_body"
    assert _thread(person) == []


def test_the_wrong_content_type_is_415(client, providers, person):
    callback = providers.telegram.inbound(4242, "hi")
    callback.content_type = "text/plain"
    response = callback.send(client)
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    form = providers.twilio.inbound(NUMBER, "hi")
    form.content_type = "application/json"
    assert form.send(client).status_code == 415


def test_a_signed_body_of_the_wrong_shape_is_a_400(client, providers):
    assert providers.telegram.update({"no": "update_id"}).send(client).status_code == 400
    assert (
        providers.twilio.signed("/channels/twilio/inbound", {"From": NUMBER, "Body": "x"}).send(client).status_code
        == 400
    )
    response = providers.bluebubbles.event("new-message", {"guid": "g"}, secret=providers_secret()).send(client)
    assert response.status_code == 200  # an event without a sender: nothing to record, nothing to retry


def providers_secret() -> str:
    from tests.providers import BLUEBUBBLES_WEBHOOK_SECRET

    return BLUEBUBBLES_WEBHOOK_SECRET


def test_only_post_is_accepted(client, providers):
    response = client.get("/channels/twilio/inbound")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_a_provider_that_is_not_configured_is_404(client, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    response = client.post("/channels/telegram/webhook", b"{}", content_type="application/json")
    assert response.status_code == 404 and response.json()["code"] == "channel_not_offered"


def test_an_unknown_sender_gets_one_answer_a_day_and_no_thread(client, providers):
    for text in ("hello?", "anyone?"):
        assert providers.twilio.inbound(STRANGER, text).send(client).status_code == 200
    assert Message.objects.count() == 0
    (hint,) = providers.twilio.texts_to(STRANGER)
    assert "not linked" in hint and "http://testserver/settings/channels/" in hint
    LinkHint.objects.update(sent_at=timezone.now() - timedelta(days=1, seconds=1))
    providers.twilio.inbound(STRANGER, "a day later").send(client)
    assert len(providers.twilio.texts_to(STRANGER)) == 2
    assert Message.objects.count() == 0


def test_an_unknown_sender_on_telegram_is_told_once(client, providers):
    providers.telegram.inbound(777, "hi").send(client)
    providers.telegram.inbound(777, "hi again").send(client)
    assert len(providers.telegram.texts_to("777")) == 1
    assert Message.objects.count() == 0


def test_whatsapp_cloud_messages_with_media_arrive_as_links(client, providers, person):
    assert providers.whatsapp.inbound(NUMBER, "look at this", image="1234567890").send(client).status_code == 200
    (message,) = _thread(person)
    assert message.source == Source.WHATSAPP and message.text == "look at this"
    (media,) = message.context["media"]
    assert media["id"] == "1234567890" and media["url"].endswith("/1234567890")
    assert providers.whatsapp.requests == []  # nothing fetched while Meta waited


def test_whatsapp_cloud_verification_handshake(client, providers):
    ok = providers.whatsapp.verification().send(client)
    assert ok.status_code == 200 and ok.content == b"1158201444"
    wrong = providers.whatsapp.verification(token="guess").send(client)
    assert wrong.status_code == 403


def test_a_status_callback_for_a_message_we_do_not_know_is_answered_and_records_nothing(client, providers):
    assert providers.twilio.status("SM" + "f" * 32, "delivered").send(client).status_code == 200
    assert providers.whatsapp.status("wamid.unknown", "read").send(client).status_code == 200
    assert providers.bluebubbles.updated("p:0/UNKNOWN").send(client).status_code == 200
    assert Message.objects.count() == 0 and InboundEvent.objects.count() == 0


def test_a_twilio_status_callback_is_never_read_as_a_message(client, providers, person):
    sent = providers.twilio.inbound(NUMBER, "x")  # only to learn the form's shape
    status = providers.twilio.status("SM" + "a" * 32, "sent")
    assert status.send(client).status_code == 200
    assert _thread(person) == [] and sent


def test_bluebubbles_messages_land_and_our_own_and_group_ones_do_not(client, providers, person):
    assert providers.bluebubbles.inbound(NUMBER, "from imessage").send(client).status_code == 200
    own = providers.bluebubbles.event(
        "new-message",
        {"guid": "mine", "text": "x", "isFromMe": True, "handle": {"address": NUMBER}},
        secret=providers_secret(),
    )
    group = providers.bluebubbles.event(
        "new-message",
        {"guid": "grp", "text": "x", "handle": {"address": NUMBER}, "chats": [{"guid": "iMessage;+;chat123"}]},
        secret=providers_secret(),
    )
    assert own.send(client).status_code == 200 and group.send(client).status_code == 200
    assert [(m.text, m.source) for m in _thread(person)] == [("from imessage", Source.IMESSAGE)]


def test_telegram_messages_from_a_linked_chat_land(client, providers, person):
    assert providers.telegram.inbound(4242, "from telegram").send(client).status_code == 200
    (message,) = _thread(person)
    assert message.source == Source.TELEGRAM and message.context["from"] == "4242"


def test_messages_keep_the_order_they_were_sent_in(client, providers, person):
    for n in range(3):
        providers.twilio.inbound(NUMBER, f"part {n}").send(client)
    assert [m.text for m in _thread(person)] == ["part 0", "part 1", "part 2"]


def test_a_deactivated_persons_channel_falls_silent(client, providers, person):
    person.is_active = False
    person.save()
    assert providers.twilio.inbound(NUMBER, "hi").send(client).status_code == 200
    assert _thread(person) == [] and providers.twilio.sent == []


def test_over_http_against_a_running_server(live_server, providers, settings, transactional_db):
    """The same request over a real socket (the signature is over PUBLIC_BASE_URL + path, byte for byte)."""
    from tests.providers import configure

    configure(settings, providers, live_server.url)
    user = UserFactory()
    LinkedAddress.objects.create(user=user, channel="sms", address=NUMBER)
    status, _ = providers.twilio.inbound(NUMBER, "over the wire").post(live_server.url)
    assert status == 200
    assert [m.text for m in _thread(user)] == ["over the wire"]
    settings.PUBLIC_BASE_URL = live_server.url + "/"  # not what Twilio signed
    status, _ = providers.twilio.inbound(NUMBER, "forged").post(live_server.url)
    assert status == 403


def test_a_retry_racing_the_first_delivery_records_once(live_server, providers, settings, transactional_db):
    """Twilio retries when our answer is late: the retry can arrive while the first request is still recording. The
    second waits on the unique index for the first to commit, then records nothing."""
    import threading

    from tests.providers import configure

    configure(settings, providers, live_server.url)
    user = UserFactory()
    LinkedAddress.objects.create(user=user, channel="sms", address=NUMBER)
    callback = providers.twilio.inbound(NUMBER, "only once")
    start = threading.Barrier(4)
    answers: list[int] = []

    def deliver() -> None:
        start.wait()
        answers.append(callback.post(live_server.url)[0])

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert answers == [200, 200, 200, 200]
    assert [m.text for m in _thread(user)] == ["only once"]
    assert Delivery.objects.count() == 1


def test_a_whatsapp_batch_with_one_impossible_message_takes_the_others_and_answers_200(client, providers, person):
    """Meta batches messages and retries a non-2xx for hours: a batch whose second message has a 300-character id
    was answered 400 after the first was recorded. Now the first is taken, the second left out, the answer 200
    (a retry then records nothing twice)."""
    digits = NUMBER.removeprefix("+")
    batch = providers.whatsapp.event(
        {
            "contacts": [{"profile": {"name": "Test Person"}, "wa_id": digits}],
            "messages": [
                {"from": digits, "id": "wamid.IN1", "timestamp": "1700000000", "type": "text", "text": {"body": "one"}},
                {"from": digits, "id": "w" * 300, "timestamp": "1700000001", "type": "text", "text": {"body": "two"}},
            ],
        }
    )
    first = batch.send(client)
    assert (first.status_code, first.json()) == (200, {"success": True, "recorded": 1, "duplicates": 0, "refused": 1})
    again = batch.send(client)
    assert again.json() == {"success": True, "recorded": 0, "duplicates": 1, "refused": 1}
    assert [m.text for m in _thread(person)] == ["one"]
