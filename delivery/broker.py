"""Deliveries through a broker: Dramatiq on RabbitMQ (``amqp://``) or Redis (``redis://``), chosen by
DELIVERY_BROKER_URL. Imported only where that is set.

The database stays the ledger: a message carries only its delivery's id, and the actor claims that delivery with the
same statement as the database queue (delivery/queue.py: only if it is due, first in its thread and not held under a
live lease), so a duplicate or stale message does nothing and the order per thread holds. What the broker replaces
is the polling: a message is pushed to a worker the moment its request commits.

- The request sends ``deliver(id)`` after its commit. A delivery that is not first in its thread is left alone: when
  the one before it finishes, its worker sends the thread's next one (the baton).
- A transient failure is sent again with a delay (the backoff); the thread's later messages wait, as with the
  database queue.
- Each worker process renews the leases of the attempts it has in flight (a thread of its own, one statement every
  third of a lease, delivery/leases.py), so a long attempt keeps its delivery.
- A worker killed mid-attempt: its message was not acknowledged, so the broker hands it to another worker, which
  finds the delivery still under its lease and sends it again for the moment the lease expires.
- A message lost between the commit and the broker (the web process died, the broker was unreachable): every worker
  process sweeps the database every DELIVERY_SWEEP_SECONDS for deliveries that are due, first in their thread and
  waiting for over a minute, or whose lease expired, and sends them. No cron.

Database connections come from a small pool (DATABASE_POOL_SIZE, set by delivery/dramatiq_worker.py), held only to
claim and to record, never while the runtime answers: a few per process, however many threads.
"""

import logging
import threading
from datetime import timedelta
from typing import Any

import dramatiq
from django.conf import settings
from django.db import connection
from django.utils import timezone
from dramatiq.middleware import Middleware

from conversations.models import Delivery, DeliveryStatus
from delivery import lifecycle, queue
from delivery.engine import Engine, record
from delivery.queue import next_in_thread

logger = logging.getLogger("delivery.handoff")

# A queued delivery due this long without a worker taking it is sent again by the sweep.
STRANDED_AFTER = timedelta(minutes=1)


def _broker(url: str) -> dramatiq.Broker:
    if url.startswith(("redis://", "rediss://", "unix://")):
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=url)
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    return RabbitmqBroker(url=url)


# The attempts this process has in flight, their leases renewed by a thread of its own every third of a lease.
renewals = lifecycle.renewals()


class Sweeper(Middleware):
    """In each worker process, a thread that sends the deliveries nobody was told about (see the module), and one
    that renews the leases of the attempts in flight."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        threading.Thread(target=self._sweep_forever, name="delivery-sweeper", daemon=True).start()
        renewals.start("delivery-lease-renewer")

    def _sweep_forever(self) -> None:
        stop = threading.Event()
        while not stop.wait(settings.DELIVERY_SWEEP_SECONDS):
            try:
                for delivery_id in stranded():
                    deliver.send(delivery_id)
            except Exception as error:
                logger.warning("delivery sweep failed (%s); trying again", type(error).__name__)
            finally:
                connection.close()


broker = _broker(settings.DELIVERY_BROKER_URL)
broker.add_middleware(Sweeper())
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=settings.DELIVERY_BROKER_QUEUE, max_retries=0)
def deliver(delivery_id: int) -> None:
    """One attempt at a delivery, if it is claimable now (see the module)."""
    try:
        claims = queue.claim(1, delivery_id)
        if not claims:
            _not_claimable(delivery_id)
            return
    finally:
        connection.close()  # back to the pool while the runtime answers
    claim = claims[0]
    renewals.add(claim.delivery_id, claim.attempt)
    try:
        finished = Engine.attempt_now(claim)
    finally:
        renewals.discard(claim.delivery_id, claim.attempt)
    try:
        status = record(claim, finished.outcome, finished.seconds)
        if status == DeliveryStatus.QUEUED:
            _send_when_due(delivery_id)
        else:
            successor = next_in_thread(delivery_id)
            if successor is not None:
                deliver.send(successor)
    finally:
        connection.close()


def _send_when_due(delivery_id: int) -> None:
    """Send the delivery again for when it is due: its retry time, or the end of a live lease."""
    row = Delivery.objects.filter(pk=delivery_id).values_list("status", "next_attempt_at", "lease_expires_at").first()
    if row is None:
        return
    status, next_attempt_at, lease_expires_at = row
    now = timezone.now()
    due = next_attempt_at if status == DeliveryStatus.QUEUED else lease_expires_at
    if status not in (DeliveryStatus.QUEUED, DeliveryStatus.PROCESSING) or due is None or due <= now:
        return
    milliseconds = int((due - now).total_seconds() * 1000) + 200
    deliver.send_with_options(args=(delivery_id,), delay=milliseconds)


def _not_claimable(delivery_id: int) -> None:
    """Delivered, failed, waiting behind an earlier message of its thread (the baton will come), not yet due, or
    held under a live lease (a worker died mid-attempt, or another is on it): only the last two are sent again."""
    _send_when_due(delivery_id)


_STRANDED = """
    SELECT c.id FROM {delivery} AS c
    WHERE ((c.status = 'queued' AND COALESCE(c.next_attempt_at, c.created_at) < %(stranded)s)
           OR (c.status = 'processing' AND c.lease_expires_at < %(now)s))
      AND NOT EXISTS (
          SELECT 1 FROM {delivery} AS e
          WHERE e.conversation_id = c.conversation_id AND e.status IN ('queued', 'processing') AND e.id < c.id)
    ORDER BY c.id LIMIT 1000
"""


def stranded() -> list[int]:
    """Deliveries first in their thread that no worker seems to have been told about."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            _STRANDED.format(delivery=connection.ops.quote_name(Delivery._meta.db_table)),
            {"now": now, "stranded": now - STRANDED_AFTER},
        )
        return [int(row[0]) for row in cursor.fetchall()]
