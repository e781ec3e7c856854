"""Only a thread's head is a candidate for a claim (delivery/leases.py ``heads_sql``): a thread's later messages are
never looked at, so one deep thread neither slows nor blocks anyone else's claim, and a busy queue's claims start
from a thread drawn at random (``Windows``) so that no thread waits behind all the others. On the default database
(SQLite under `make test`, PostgreSQL in CI's second pass); bench/claim_depth.py measures the cost."""

import pytest

from conversations.models import Delivery, DeliveryStatus
from delivery import leases, lifecycle
from delivery.lifecycle import Held
from tests.factories import UserFactory
from tests.test_claim_rules import accept, claimed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.DELIVERY_LEASE_SECONDS = 30
    settings.DELIVERY_MAX_TAKEOVERS = 2
    lifecycle._windows = leases.Windows()


def test_a_deep_thread_gives_one_candidate_and_every_other_thread_its_head():
    runaway, others = UserFactory(), [UserFactory() for _ in range(3)]
    deep = [accept(runaway, f"r{n}") for n in range(40)]
    heads = [accept(person, "hello") for person in others]

    assert claimed(limit=10) == [(deep[0].pk, 1)] + [(head.pk, 1) for head in heads]
    assert lifecycle.delivered([(Held(deep[0].pk, 1), "ok")])
    assert claimed(limit=10) == [(deep[1].pk, 1)]  # the next in the deep thread, only once its head is done


def test_a_head_waits_while_a_later_message_of_its_thread_is_in_flight():
    """A staff retry may queue an earlier message again while a later one is being attempted: it waits."""
    ada = UserFactory()
    first, second = accept(ada, "a1"), accept(ada, "a2")
    Delivery.objects.filter(pk=first.pk).update(status=DeliveryStatus.FAILED)
    assert claimed() == [(second.pk, 1)]
    assert lifecycle.queue_again(first.pk)
    assert claimed() == []


def test_a_busy_queue_starts_its_next_claim_at_a_random_thread_and_wraps_around():
    people = [UserFactory() for _ in range(6)]
    heads = [accept(person, "hello") for person in people]
    first = claimed(limit=2)
    assert first == [(heads[0].pk, 1), (heads[1].pk, 1)]  # an idle queue's claim starts from the first thread
    seen = {delivery_id for delivery_id, _ in first}
    for _ in range(2):  # filled: the next starts at random and wraps around, never claiming twice
        batch = claimed(limit=2)
        assert len(batch) == 2
        seen |= {delivery_id for delivery_id, _ in batch}
    assert seen == {head.pk for head in heads}


def test_windows_rotate_only_after_a_filled_claim():
    windows, starts = leases.Windows(), []

    def run(from_thread: int, until_thread: int, wanted: int) -> list[int]:
        starts.append((from_thread, until_thread))
        return list(range(wanted)) if from_thread == leases.FIRST_THREAD else []

    windows.claim(run, 3, lambda: 1000)
    assert starts == [(leases.FIRST_THREAD, leases.LAST_THREAD)]
    starts.clear()
    got = windows.claim(run, 3, lambda: 1000)  # filled before: a random start, then the threads before it
    assert len(got) == 3
    assert starts[-1][0] == leases.FIRST_THREAD and (len(starts) == 1 or starts[0][1] == leases.LAST_THREAD)
