"""The hand-off task (the immediate backend, and any task backend outside the database), and how a delivery gets its
attempt whichever backend is configured."""

import logging
from datetime import datetime
from functools import partial

from django.db import transaction
from django.tasks import task
from django_tasks_db import DatabaseBackend

from conversations.models import Delivery, DeliveryStatus
from delivery import lifecycle

logger = logging.getLogger("delivery.handoff")


@task
def deliver_message(message_id: str | int) -> str:
    """One attempt to hand a recorded message (by its public id) to the assistant; returns the delivery's status
    afterwards. The task carries the public id, not the delivery's key, because the id exists before any row is
    written: the request writes the message, its delivery and this task's row in one statement. An integer is a
    delivery's key, as tasks enqueued before that change carry it: they still run after a deploy."""
    from delivery.handoff import attempt_delivery

    if queued_in_database():
        # A task row written by an earlier release, before the delivery rows became the queue: the engine running
        # in this same worker process claims the delivery itself (in its thread's order), so this does nothing.
        return "skipped"
    if isinstance(message_id, int):
        delivery_id: int | None = message_id
    else:
        delivery_id = Delivery.objects.filter(message__public_id=message_id).values_list("pk", flat=True).first()
    if delivery_id is None:
        return "skipped"
    deferrable = can_defer()
    status = attempt_delivery(delivery_id, deferrable)
    if status == "queued" and deferrable:  # the retry, as a task due at the delivery's next_attempt_at
        delivery = Delivery.objects.select_related("message").get(pk=delivery_id)
        enqueue_delivery(delivery.message.public_id, run_after=delivery.next_attempt_at, delivery_id=delivery.pk)
    elif status in (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED):
        _pass_the_baton(delivery_id)
    return status


def _pass_the_baton(delivery_id: int) -> None:
    """The thread's next message waited behind this one (its own task found it not first in its thread): its turn."""
    from delivery.queue import next_in_thread

    successor = next_in_thread(delivery_id)
    if successor is not None:
        public_id = Delivery.objects.filter(pk=successor).values_list("message__public_id", flat=True).first()
        if public_id is not None:
            enqueue_delivery(public_id, delivery_id=successor)


def can_defer() -> bool:
    """Whether the task backend can run a task later (the immediate backend cannot)."""
    return bool(deliver_message.get_backend().supports_defer)


def queued_in_database() -> bool:
    """Whether deliveries wait in the database for the delivery engine (delivery/engine.py, run by ``manage.py
    worker``): with the database task backend. The delivery row is then the queue's entry: it is written with the
    message, in the same statement, and nothing else needs enqueuing."""
    return isinstance(deliver_message.get_backend(), DatabaseBackend)


def enqueue_delivery(message_id: str, run_after: datetime | None = None, *, delivery_id: int | None = None) -> None:
    """Make sure a queued delivery gets its attempt, as part of the caller's transaction.

    With the database backend there is nothing to do: the engine
    claims queued deliveries when they are due (``next_attempt_at``). Any other backend gets a task, told after the
    commit; should that fail, the delivery stays queued and `retrydeliveries --due` picks it up.
    """
    if queued_in_database():
        return
    queued_task = deliver_message if run_after is None else deliver_message.using(run_after=run_after)
    transaction.on_commit(partial(queued_task.enqueue, message_id), robust=True)


def retry_delivery(delivery: Delivery) -> bool:
    """Give a failed, queued or abandoned delivery an attempt now. False if it is delivered or an attempt is in
    progress. Only a failed one starts a fresh round (its count back to 0); a queued or abandoned one keeps its
    count, so the runtime never sees the same attempt number twice for a message it may already have received
    (a dead worker's attempt 1 is followed by attempt 2, not by another attempt 1)."""
    with transaction.atomic():
        requeued = lifecycle.queue_again(delivery.pk)
        if requeued:
            enqueue_delivery(delivery.message.public_id, delivery_id=delivery.pk)
    if requeued:
        logger.info("delivery %s queued again by staff", delivery.pk)
    return bool(requeued)
