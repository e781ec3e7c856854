"""The claim's rules on the default database (SQLite under `make test`, PostgreSQL in CI's second pass), fast: the
order per thread, leases, takeovers and their limit, renewals, and that an attempt that lost its claim writes
nothing. Each assertion pins one rule of delivery/lifecycle.py and delivery/leases.py, so that changing
one line of either (a comparison, a status, a counter) fails here, not only in the PostgreSQL engine tests."""

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from delivery import lifecycle, queue
from delivery.lifecycle import Held
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.DELIVERY_LEASE_SECONDS = 30
    settings.DELIVERY_MAX_TAKEOVERS = 2
    settings.ASSISTANT_MAX_ATTEMPTS = 5
    lifecycle._last_reaped = 0.0


def accept(user, text: str) -> Delivery:
    conversation = conversation_of(user)
    message = Message.objects.create(conversation=conversation, role=Role.USER, source=Source.API, text=text)
    return Delivery.objects.create(message=message, conversation=conversation, endpoint=Endpoint.CURRENT)


def claimed(limit: int = 10) -> list[tuple[int, int]]:
    lifecycle._last_reaped = 0.0  # let every claim look for exhausted deliveries (once a second otherwise)
    return [(c.delivery_id, c.attempt) for c in queue.claim(limit)]


def expire(delivery: Delivery) -> None:
    Delivery.objects.filter(pk=delivery.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def state(delivery: Delivery) -> tuple[str, int, int]:
    delivery.refresh_from_db()
    return delivery.status, delivery.attempts, delivery.takeovers


def test_one_at_a_time_per_thread_in_acceptance_order_threads_in_parallel():
    ada, bob = UserFactory(), UserFactory()
    a1, a2, b1 = accept(ada, "a1"), accept(ada, "a2"), accept(bob, "b1")

    assert claimed() == [(a1.pk, 1), (b1.pk, 1)]  # a2 waits behind a1
    assert claimed() == []  # both attempts hold their threads
    assert lifecycle.delivered([(Held(a1.pk, 1), "ok")])
    assert claimed() == [(a2.pk, 1)]


def test_a_retry_in_backoff_keeps_its_place_and_is_claimed_when_due():
    ada = UserFactory()
    first, second = accept(ada, "1"), accept(ada, "2")
    assert claimed() == [(first.pk, 1)]
    later = timezone.now() + timedelta(minutes=1)
    assert lifecycle.retry_later(Held(first.pk, 1), "HTTP 503", later)

    assert claimed() == []  # not due, and the second waits behind it
    Delivery.objects.filter(pk=first.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert claimed() == [(first.pk, 2)]
    assert lifecycle.failed(Held(first.pk, 2), "gave up")
    assert claimed() == [(second.pk, 1)]  # a failed one no longer holds the thread


def test_a_claim_sets_a_lease_of_the_configured_length(settings):
    settings.DELIVERY_LEASE_SECONDS = 7
    delivery = accept(UserFactory(), "hi")
    before = timezone.now()
    claimed()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.PROCESSING
    assert timedelta(seconds=6.5) < delivery.lease_expires_at - before < timedelta(seconds=8)


def test_an_expired_lease_is_taken_over_as_the_next_attempt_and_counted():
    delivery = accept(UserFactory(), "hi")
    claimed()
    assert claimed() == []  # live lease
    expire(delivery)
    assert claimed() == [(delivery.pk, 2)]
    assert state(delivery) == (DeliveryStatus.PROCESSING, 2, 1)
    # The lost attempt's late outcome is refused; the new one's is written.
    assert not lifecycle.delivered([(Held(delivery.pk, 1), "late")])
    assert not lifecycle.retry_later(Held(delivery.pk, 1), "late", timezone.now())
    assert not lifecycle.failed(Held(delivery.pk, 1), "late")
    assert lifecycle.delivered([(Held(delivery.pk, 2), "on time")])
    delivery.refresh_from_db()
    assert (delivery.status, delivery.reply.text) == (DeliveryStatus.DELIVERED, "on time")


def test_a_later_message_does_not_overtake_an_earlier_one_whose_worker_died():
    ada = UserFactory()
    first, _second = accept(ada, "1"), accept(ada, "2")
    claimed()
    expire(first)
    assert claimed() == [(first.pk, 2)]  # the earlier one again, never the second first


def test_after_the_last_takeover_the_delivery_fails_with_the_reason_and_its_thread_moves_on():
    ada = UserFactory()
    poison, after = accept(ada, "kills its worker"), accept(ada, "next")
    assert claimed() == [(poison.pk, 1)]
    for attempt in (2, 3):  # DELIVERY_MAX_TAKEOVERS = 2 takeovers
        expire(poison)
        assert claimed() == [(poison.pk, attempt)]
    assert state(poison) == (DeliveryStatus.PROCESSING, 3, 2)
    expire(poison)

    lifecycle._last_reaped = timezone.now().timestamp()  # the claim alone (reaping ran a moment ago)
    assert queue.claim(10) == []  # never taken over a third time; it still holds its thread until failed
    assert claimed() == [(after.pk, 1)]
    poison.refresh_from_db()
    assert (poison.status, poison.attempts, poison.takeovers) == (DeliveryStatus.FAILED, 3, 2)
    assert "worker was lost 3 times" in poison.last_error
    assert poison.lease_expires_at is None and poison.finished_at is not None


def test_a_put_back_attempt_is_not_counted_nor_a_takeover():
    delivery = accept(UserFactory(), "hi")
    claimed()
    assert lifecycle.put_back([Held(delivery.pk, 1)]) == 1
    assert state(delivery) == (DeliveryStatus.QUEUED, 0, 0)
    assert claimed() == [(delivery.pk, 1)]


def test_renewal_extends_the_leases_still_held_in_one_statement_and_reports_the_lost(
    django_assert_num_queries, settings
):
    ada, bob = UserFactory(), UserFactory()
    kept, lost = accept(ada, "kept"), accept(bob, "lost")
    claimed()
    Delivery.objects.update(lease_expires_at=timezone.now() + timedelta(seconds=1))
    expire(lost)
    assert claimed() == [(lost.pk, 2)]  # taken over by another worker

    with django_assert_num_queries(1):
        renewed = lifecycle.renew([Held(kept.pk, 1), Held(lost.pk, 1)])
    assert renewed == {kept.pk}
    kept.refresh_from_db()
    assert kept.lease_expires_at > timezone.now() + timedelta(seconds=settings.DELIVERY_LEASE_SECONDS - 2)


def test_renewals_tick_renews_every_third_of_a_lease_and_forgets_the_lost(settings):
    settings.DELIVERY_LEASE_SECONDS = 30
    kept, lost = accept(UserFactory(), "kept"), accept(UserFactory(), "lost")
    claimed()
    renewals = lifecycle.renewals()
    renewals.add(kept.pk, 1)
    renewals.add(lost.pk, 1)
    Delivery.objects.filter(pk=lost.pk).update(attempts=2)  # taken over meanwhile

    assert renewals.tick(100.0)
    assert not renewals.tick(109.0)  # before a third of the lease
    assert renewals.lost == {lost.pk} and renewals.held() == [(kept.pk, 1)]
    assert renewals.tick(110.0)


def test_a_staff_retry_of_a_failed_delivery_starts_a_fresh_round():
    delivery = accept(UserFactory(), "hi")
    claimed()
    lifecycle.failed(Held(delivery.pk, 1), "refused")
    Delivery.objects.filter(pk=delivery.pk).update(takeovers=2)
    assert lifecycle.queue_again(delivery.pk)
    assert state(delivery) == (DeliveryStatus.QUEUED, 0, 0)
    assert claimed() == [(delivery.pk, 1)]
    assert not lifecycle.queue_again(delivery.pk)  # an attempt in progress


def test_the_receipt_of_a_delivery_given_up_after_its_takeovers_says_why(client, settings):
    from tests.factories import make_key

    key, secret = make_key()
    delivery = accept(key.owner, "kills its worker")
    Message.objects.filter(pk=delivery.message_id).update(api_key=key)
    claimed()
    for _ in range(settings.DELIVERY_MAX_TAKEOVERS):
        expire(delivery)
        claimed()
    expire(delivery)
    lifecycle.fail_exhausted()

    answer = client.get(
        f"/api/v1/inbound/messages/{delivery.message.public_id}", HTTP_AUTHORIZATION=f"Bearer {secret}"
    ).json()
    assert answer["status"] == "failed"
    assert "worker lost" in answer["message"] and "later messages went on" in answer["message"]
