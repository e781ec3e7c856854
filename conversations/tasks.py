"""The hand-off task, and how it is enqueued so that it exists exactly when the delivery record does."""

from datetime import datetime
from functools import partial

from django.db import transaction
from django.tasks import task
from django_tasks_db import DatabaseBackend

from ops import metrics


@task
def deliver_message(delivery_id: int) -> str:
    """One attempt to hand a recorded message to the assistant; returns the delivery's status afterwards."""
    from conversations.handoff import attempt_delivery

    status = attempt_delivery(delivery_id)
    if status != "skipped":
        metrics.delivery_attempt_finished("retrying" if status == "queued" else status)
    return status


def can_defer() -> bool:
    """Whether the task backend can run a task later (the immediate backend cannot)."""
    return bool(deliver_message.get_backend().supports_defer)


def enqueue_delivery(delivery_id: int, run_after: datetime | None = None) -> None:
    """Enqueue an attempt as part of the caller's transaction.

    With the database backend the task row is written inside that transaction, so the message, its delivery and
    its task commit (or roll back) together. Any other backend lives outside the database and is told after the
    commit; should that fail, the delivery stays queued and `retrydeliveries --due` picks it up.
    """
    queued_task = deliver_message if run_after is None else deliver_message.using(run_after=run_after)
    if isinstance(queued_task.get_backend(), DatabaseBackend):
        queued_task.enqueue(delivery_id)
    else:
        transaction.on_commit(partial(queued_task.enqueue, delivery_id), robust=True)
