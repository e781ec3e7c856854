"""The hand-off task, and how it is enqueued so that it exists exactly when the delivery record does."""

import logging
from datetime import datetime
from functools import partial

from django.db import transaction
from django.tasks import signals as task_signals
from django.tasks import task
from django.tasks.signals import task_enqueued
from django_tasks_db import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from ops import metrics


@task
def deliver_message(message_id: str | int) -> str:
    """One attempt to hand a recorded message (by its public id) to the assistant; returns the delivery's status
    afterwards. The task carries the public id, not the delivery's key, because the id exists before any row is
    written: the request writes the message, its delivery and this task's row in one statement. An integer is a
    delivery's key, as tasks enqueued before that change carry it: they still run after a deploy."""
    from conversations.models import Delivery
    from delivery.handoff import attempt_delivery

    if isinstance(message_id, int):
        delivery_id: int | None = message_id
    else:
        delivery_id = Delivery.objects.filter(message__public_id=message_id).values_list("pk", flat=True).first()
    status = "skipped" if delivery_id is None else attempt_delivery(delivery_id)
    if status != "skipped":
        metrics.delivery_attempt_finished("retrying" if status == "queued" else status)
    return status


def can_defer() -> bool:
    """Whether the task backend can run a task later (the immediate backend cannot)."""
    return bool(deliver_message.get_backend().supports_defer)


def new_task_row(message_id: str) -> DBTaskResult | None:
    """With the database backend: the unsaved row that enqueues ``deliver_message(message_id)``, for the caller to
    insert together with the message (``ingestion.hotpath.inserts``); the caller then calls ``announce_enqueued``.
    None with any other backend: use ``enqueue_delivery``.

    The fields are the ones ``DatabaseBackend.enqueue`` writes (tests/test_task_backends.py compares the two rows).
    """
    backend = deliver_message.get_backend()
    if not isinstance(backend, DatabaseBackend):
        return None
    backend.validate_task(deliver_message)
    return DBTaskResult(
        id=backend._get_id(),
        args_kwargs={"args": [message_id], "kwargs": {}},
        priority=deliver_message.priority,
        task_path=deliver_message.module_path,
        queue_name=deliver_message.queue_name,
        run_after=deliver_message.run_after,  # type: ignore[misc]  # None: django-tasks-db fills it in on pre_save
        backend_name=backend.alias,
    )


def announce_enqueued(row: DBTaskResult) -> None:
    """What ``DatabaseBackend.enqueue`` does after writing its row: the ``task_enqueued`` signal.

    The ``TaskResult`` the signal carries costs about as much to build as the rest of the hand-off's Python, and
    the only receiver Django connects logs at DEBUG; so the signal is sent when anyone would notice: another
    receiver, or that logger enabled for DEBUG.
    """
    receivers, async_receivers = task_enqueued._live_receivers(DatabaseBackend)
    others = [r for r in [*receivers, *async_receivers] if r is not task_signals.log_task_enqueued]
    if others or task_signals.logger.isEnabledFor(logging.DEBUG):
        task_enqueued.send(DatabaseBackend, task_result=row.task_result)


def enqueue_delivery(message_id: str, run_after: datetime | None = None) -> None:
    """Enqueue an attempt as part of the caller's transaction.

    With the database backend the task row is written inside that transaction, so the delivery's state and its
    task commit (or roll back) together. Any other backend lives outside the database and is told after the
    commit; should that fail, the delivery stays queued and `retrydeliveries --due` picks it up.
    """
    queued_task = deliver_message if run_after is None else deliver_message.using(run_after=run_after)
    if isinstance(queued_task.get_backend(), DatabaseBackend):
        queued_task.enqueue(message_id)
    else:
        transaction.on_commit(partial(queued_task.enqueue, message_id), robust=True)
