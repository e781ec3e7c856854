"""The hand-off task (the immediate backend, and any task backend outside the database), and how a delivery gets its
attempt whichever backend is configured: always by the delivery engine's claim, attempt and ``settle``
(delivery/engine.py), on the worker's threads or, for this task, in the thread that runs it."""

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
    """Deliver what is claimable now (this message, unless it waits behind an earlier one of its thread, and its
    thread's next ones as each finishes), the engine's one way (delivery/engine.py ``deliver_here``), in this thread;
    returns the message's delivery's status afterwards. The task carries the public id, which exists before any row
    is written; an integer is a delivery's key, as tasks enqueued by an earlier release carry it."""
    if queued_in_database():
        # A task row written by an earlier release, before the delivery rows became the queue: the engine running
        # in this same worker process claims the delivery itself (in its thread's order), so this does nothing.
        return "skipped"
    from delivery.engine import deliver_here

    deliver_here()
    by = {"pk": message_id} if isinstance(message_id, int) else {"message__public_id": message_id}
    delivery = Delivery.objects.filter(**by).select_related("message").first()
    if delivery is None:
        return "skipped"
    if delivery.status == DeliveryStatus.QUEUED and delivery.next_attempt_at is not None:
        if can_defer():  # the retry, as a task due at the delivery's next_attempt_at
            enqueue_delivery(delivery.message.public_id, run_after=delivery.next_attempt_at)
        else:
            logger.warning(
                "delivery %s: the task backend cannot defer, so its retry waits for `manage.py retrydeliveries --due`",
                delivery.pk,
            )
    return delivery.status


def can_defer() -> bool:
    """Whether the task backend can run a task later (the immediate backend cannot)."""
    return bool(deliver_message.get_backend().supports_defer)


def queued_in_database() -> bool:
    """Whether deliveries wait in the database for the delivery engine (delivery/engine.py, run by ``manage.py
    worker``): with the database task backend. The delivery row is then the queue's entry: it is written with the
    message, in the same statement, and nothing else needs enqueuing."""
    return isinstance(deliver_message.get_backend(), DatabaseBackend)


def enqueue_delivery(message_id: str, run_after: datetime | None = None) -> None:
    """Make sure a queued delivery gets its attempt, as part of the caller's transaction. Nothing to do with the
    database backend: the engine claims queued deliveries when they are due (``next_attempt_at``). Any other backend
    gets a task, told after the commit; should that fail, the delivery stays queued for `retrydeliveries --due`."""
    if queued_in_database():
        return
    queued_task = deliver_message if run_after is None else deliver_message.using(run_after=run_after)
    transaction.on_commit(partial(queued_task.enqueue, message_id), robust=True)


def retry_delivery(delivery: Delivery) -> bool:
    """Staff: queue the delivery again (delivery/lifecycle.py ``queue_again``: False if it is delivered or being
    attempted) and, with a task backend outside the database, enqueue its task."""
    with transaction.atomic():
        requeued = lifecycle.queue_again(delivery.pk)
        if requeued:
            enqueue_delivery(delivery.message.public_id)
    if requeued:
        logger.info("delivery %s queued again by staff", delivery.pk)
    return bool(requeued)
