"""A linked person's message on a channel is one statement once the process knows the address (channels/senders.py,
channels/inbound.py): what is remembered is checked by that statement, so unlinking, linking to someone else and
deactivating count from the next message; a retry, even one racing the first, is recorded once; the address's last
inbound time and WhatsApp's held texts move with the message. Every provider takes the same path."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from channels import linking, senders
from channels.models import InboundEvent, LinkedAddress, OutboundMessage, OutboundStatus
from conversations.models import Delivery, Message, Role
from tests.factories import UserFactory
from tests.test_hotpath import _no_statement_through_djangos_cursor

pytestmark = pytest.mark.django_db

NUMBER = "+14155550134"
CHAT = 4242

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement path (ingestion/hotpath/inserts.py) is PostgreSQL's"
)


@pytest.fixture
def client(django_capture_on_commit_callbacks):
    """The test client, running what each request's commit triggers (the hand-off, notices to unknown senders)."""

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
    LinkedAddress.objects.create(user=user, channel="telegram", address=str(CHAT))
    return user


def _thread(user):
    return [m.text for m in Message.objects.filter(conversation__user=user, role=Role.USER).order_by("id")]


# Each provider's message from the person's linked address, as the fake provider signs it.
SENDS = {
    "telegram": lambda p, text: p.telegram.inbound(CHAT, text),
    "sms": lambda p, text: p.twilio.inbound(NUMBER, text),
    "whatsapp": lambda p, text: p.whatsapp.inbound(NUMBER, text),
    "imessage": lambda p, text: p.bluebubbles.inbound(NUMBER, text),
}


@postgresql_only
@pytest.mark.django_db(transaction=True)  # autocommit, as in a request: no savepoint around the statement
@pytest.mark.parametrize("channel", SENDS)
def test_a_known_senders_message_is_one_statement(
    client, providers, person, channel, settings, monkeypatch, django_assert_num_queries
):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}  # production's: the delivery row
    with django_assert_num_queries(2):  # the address looked up; the message, its delivery, the provider's id, the stamp
        assert SENDS[channel](providers, "first").send(client).status_code == 200
    with monkeypatch.context() as patched, django_assert_num_queries(1):
        _no_statement_through_djangos_cursor(patched)  # and the production path is what is counted
        # Remembered: the statement alone, which checks what was remembered.
        assert SENDS[channel](providers, "second").send(client).status_code == 200

    assert _thread(person) == ["first", "second"]
    assert Delivery.objects.count() == 2
    assert InboundEvent.objects.filter(channel=channel, message__isnull=False).count() == 2


def test_what_one_message_writes(providers, person, client):
    before = timezone.now()
    assert SENDS["telegram"](providers, "hello").send(client).json()["recorded"] == 1
    (message,) = Message.objects.filter(role=Role.USER)
    event = InboundEvent.objects.get()
    assert (event.channel, event.address, event.message_id) == ("telegram", str(CHAT), message.pk)
    assert Delivery.objects.get().message_id == message.pk
    stamp = LinkedAddress.objects.get(channel="telegram").last_inbound_at
    assert stamp is not None and stamp >= before
    assert senders.recall("telegram", str(CHAT)) is not None


@pytest.mark.parametrize("channel", SENDS)
def test_unlinking_counts_from_the_next_message_though_the_address_is_remembered(client, providers, person, channel):
    SENDS[channel](providers, "before").send(client)
    assert senders.recall(channel, NUMBER if channel != "telegram" else str(CHAT)) is not None
    linked = LinkedAddress.objects.get(user=person, channel=channel)
    assert linking.unlink(person, linked.pk)

    assert SENDS[channel](providers, "after").send(client).status_code == 200

    assert _thread(person) == ["before"]
    assert InboundEvent.objects.filter(message__isnull=True).count() == 1  # noted once, as from a stranger


def test_an_address_linked_to_someone_else_meanwhile_reaches_them(client, providers, person):
    SENDS["telegram"](providers, "to the first").send(client)
    LinkedAddress.objects.filter(user=person, channel="telegram").delete()
    other = UserFactory()
    LinkedAddress.objects.create(user=other, channel="telegram", address=str(CHAT))

    SENDS["telegram"](providers, "to the second").send(client)

    assert _thread(person) == ["to the first"] and _thread(other) == ["to the second"]


def test_a_deactivated_account_falls_silent_though_the_address_is_remembered(client, providers, person):
    SENDS["sms"](providers, "while active").send(client)
    person.is_active = False
    person.save()

    assert SENDS["sms"](providers, "after").send(client).status_code == 200
    assert SENDS["sms"](providers, "and again").send(client).status_code == 200

    assert _thread(person) == ["while active"]
    assert senders.recall("sms", NUMBER) is None  # forgotten once found changed
    assert InboundEvent.objects.count() == 3  # each provider id noted, so their retries stay no-ops


def test_remembering_switched_off_still_takes_one_statement_after_the_lookup(client, providers, person, settings):
    settings.CHANNEL_SENDER_CACHE_SECONDS = 0
    for text in ("one", "two"):
        SENDS["telegram"](providers, text).send(client)
    assert senders.recall("telegram", str(CHAT)) is None
    assert _thread(person) == ["one", "two"]


def test_a_retry_of_a_remembered_senders_message_is_recorded_once(client, providers, person):
    callback = SENDS["whatsapp"](providers, "once")
    assert callback.send(client).json()["recorded"] == 1
    assert callback.send(client).json() == {"success": True, "recorded": 0, "duplicates": 1}
    assert _thread(person) == ["once"] and Delivery.objects.count() == 1


def test_the_last_inbound_time_is_left_alone_within_a_second_unless_another_address_is_newer(client, providers, person):
    telegram = LinkedAddress.objects.filter(user=person, channel="telegram")
    just_now = timezone.now()
    telegram.update(last_inbound_at=just_now)
    SENDS["telegram"](providers, "again at once").send(client)
    assert telegram.get().last_inbound_at == just_now  # no lock on the row for every message of a burst

    # The person wrote by SMS since: writing on Telegram again must make Telegram the latest (outbound routing).
    LinkedAddress.objects.filter(user=person, channel="sms").update(
        last_inbound_at=just_now + timedelta(microseconds=1)
    )
    SENDS["telegram"](providers, "back on telegram").send(client)
    assert telegram.get().last_inbound_at > just_now + timedelta(microseconds=1)

    telegram.update(last_inbound_at=just_now - timedelta(seconds=2))
    SENDS["telegram"](providers, "later").send(client)
    assert telegram.get().last_inbound_at > just_now


@pytest.mark.parametrize("remembered", [False, True])
def test_a_whatsapp_message_releases_what_was_held_for_that_number(client, providers, person, remembered):
    if remembered:
        SENDS["whatsapp"](providers, "warm up").send(client)
    other = UserFactory()
    LinkedAddress.objects.create(user=other, channel="whatsapp", address="+14155550999")
    message = Message.objects.create(conversation=person.conversation, role=Role.ASSISTANT, text="held")
    other_message = Message.objects.create(conversation=other.conversation, role=Role.ASSISTANT, text="held too")
    held = dict(status=OutboundStatus.HELD, held_reason="window closed", channel="whatsapp", text="held")
    mine = OutboundMessage.objects.create(message=message, person=person, address=NUMBER, **held)
    theirs = OutboundMessage.objects.create(message=other_message, person=other, address="+14155550999", **held)

    SENDS["whatsapp"](providers, "I'm back").send(client)

    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert (mine.status, mine.held_reason, mine.next_attempt_at) == (OutboundStatus.QUEUED, "", None)
    assert theirs.status == OutboundStatus.HELD


@pytest.mark.django_db(transaction=True)
def test_twins_racing_with_the_address_remembered_record_once(live_server, providers, settings):
    """Each worker thread of the server remembers the address first; then four copies of one message race. The
    statement of each copy finds no provider id yet; all but the first wait on the unique index for the first to
    commit, then fail as a whole: nothing of theirs is left, and they are answered as duplicates."""
    from tests.providers import configure

    configure(settings, providers, live_server.url)
    user = UserFactory()
    LinkedAddress.objects.create(user=user, channel="sms", address=NUMBER)
    assert providers.twilio.inbound(NUMBER, "warm up").post(live_server.url)[0] == 200
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
    assert _thread(user) == ["warm up", "only once"]
    assert Delivery.objects.count() == 2 and InboundEvent.objects.count() == 2


@pytest.mark.parametrize("transactional", [False, True])
def test_a_retry_fails_as_a_whole_and_is_a_duplicate(client, providers, person, request, transactional):
    """A retry's statement passes its condition (the sender still holds) and hits the provider id's unique index, as
    a twin racing the first does once the first commits. The statement fails as a whole: no message, no delivery,
    no stamp of it is left, and it is answered as a duplicate (inside a caller's transaction, only its savepoint is
    rolled back)."""
    if transactional:
        request.getfixturevalue("transactional_db")
    callback = SENDS["telegram"](providers, "once")
    assert callback.send(client).json()["recorded"] == 1
    long_ago = LinkedAddress.objects.get(channel="telegram").last_inbound_at - timedelta(hours=1)
    LinkedAddress.objects.filter(channel="telegram").update(last_inbound_at=long_ago)
    assert senders.recall("telegram", str(CHAT)) is not None

    assert callback.send(client).json() == {"success": True, "recorded": 0, "duplicates": 1}

    assert _thread(person) == ["once"] and Delivery.objects.count() == 1 and InboundEvent.objects.count() == 1
    assert LinkedAddress.objects.get(channel="telegram").last_inbound_at == long_ago
    assert SENDS["telegram"](providers, "next").send(client).json()["recorded"] == 1  # and the path goes on
