"""The queue worker's guards (delivery/queue_worker.py), for both kinds of work, on the default database (SQLite under
`make test`, PostgreSQL in CI's second pass), each pinned so that removing its line fails here:

- an outcome is written only while the attempt still holds its row (taken over meanwhile: nothing is written);
- a stopping worker starts nothing it had claimed ahead (put back, not sent);
- a put-back is not counted as an attempt; a takeover is.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from assistant.outcomes import Reply
from channels.adapters.base import Sent
from channels.models import OutboundMessage, OutboundStatus
from channels.outbound import queue as outbox
from channels.outbound.sender import Sender, Texts
from conversations.models import Delivery, DeliveryStatus
from delivery import lifecycle, queue
from delivery.engine import DELIVERIES, Engine
from delivery.queue_worker import Finished, NotStarted, settle
from tests.factories import UserFactory
from tests.providers import configure, providers  # noqa: F401  (the fixture)
from tests.test_channel_outbox import assistant_writes, person
from tests.test_claim_rules import accept

pytestmark = pytest.mark.django_db


@pytest.fixture
def twilio(providers, settings):  # noqa: F811
    configure(settings, providers, "https://assistant.example", whatsapp_through="twilio")
    settings.CHANNEL_LEASE_SECONDS = 30
    settings.CHANNEL_MAX_TAKEOVERS = 3
    outbox._last_reaped = 0.0
    return providers.twilio


def texts_queued(count: int) -> list[OutboundMessage]:
    """One text for each of ``count`` people (each their own thread), queued."""
    for n in range(count):
        assistant_writes(person(address=f"+1415555{n:04d}"), f"text {n}")
    return list(OutboundMessage.objects.order_by("id"))


def expire(model, row_id: int) -> None:
    model.objects.filter(pk=row_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_text_s_outcome_is_written_only_while_its_attempt_holds_the_row(twilio):
    [row] = texts_queued(1)
    [first] = outbox.claim(5)
    expire(OutboundMessage, row.pk)
    outbox._last_reaped = 0.0
    [second] = outbox.claim(5)  # taken over: attempt 2 holds it now
    assert (first.attempt, second.attempt) == (1, 2)

    late = Finished(first, Sent("SM-late"))
    assert settle(Texts(), late) == "skipped"
    row.refresh_from_db()
    assert (row.status, row.provider_message_id, row.attempts) == (OutboundStatus.PROCESSING, "", 2)
    assert settle(Texts(), Finished(second, Sent("SM-ok"))) == "written"
    row.refresh_from_db()
    assert (row.status, row.provider_message_id) == (OutboundStatus.SENT, "SM-ok")


def test_a_delivery_s_outcome_is_written_only_while_its_attempt_holds_it():
    delivery = accept(UserFactory(), "hello")
    lifecycle._last_reaped = 0.0
    [first] = queue.claim(5)
    expire(Delivery, delivery.pk)
    lifecycle._last_reaped = 0.0
    [second] = queue.claim(5)
    assert settle(DELIVERIES, Finished(first, Reply("late"))) == "skipped"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.reply_id) == (DeliveryStatus.PROCESSING, None)
    assert settle(DELIVERIES, Finished(second, Reply("on time"))) == "written"


def test_a_stopping_sender_starts_nothing_it_claimed_ahead_and_puts_it_back_uncounted(twilio):
    rows = texts_queued(3)
    sender = Sender(concurrency=1)
    claims = outbox.claim(5)
    assert len(claims) == 3
    sender.begin_stop()  # SIGTERM: what was claimed ahead and not begun must not be sent
    for claim in claims:
        sender._attempt(claim)
    finished = [sender._finished.get_nowait() for _ in claims]
    assert all(isinstance(f.outcome, NotStarted) for f in finished)
    assert [settle(sender.kind, f) for f in finished] == ["put back"] * 3

    assert twilio.sent == []
    for row in rows:
        row.refresh_from_db()
        assert (row.status, row.attempts, row.takeovers) == (OutboundStatus.QUEUED, 0, 0)  # not counted
    assert Sender(concurrency=1).drain() == 3 and len(twilio.sent) == 3


def test_a_stopping_engine_puts_back_what_it_held_uncounted():
    delivery = accept(UserFactory(), "hello")
    engine = Engine(concurrency=1)
    lifecycle._last_reaped = 0.0
    [claim] = queue.claim(5)
    assert settle(engine.kind, Finished(claim, NotStarted())) == "put back"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.takeovers) == (DeliveryStatus.QUEUED, 0, 0)


def test_a_takeover_of_a_text_is_counted_and_so_is_its_attempt(twilio):
    [row] = texts_queued(1)
    outbox.claim(5)
    expire(OutboundMessage, row.pk)
    outbox._last_reaped = 0.0
    outbox.claim(5)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.takeovers) == (OutboundStatus.PROCESSING, 2, 1)
