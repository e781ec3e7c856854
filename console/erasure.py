"""A person deletes their history or their account from the console (docs/howto/use-the-console.md, "Delete your
history or your account"). Messages are the person's history and are kept until they say so; then they go in batches
(ops/pruning.py), each batch its own short transaction, so a thread of any length is deleted without a long lock.

The request does the quick part (for an account: revoke, deactivate, disconnect); the batches run as the ``erase``
task (the worker, with TASK_BACKEND=database), one run of at most PRUNE_RUN_SECONDS a task, each run enqueueing the
next until nothing is left. A run starts from what is still there, so a second one (a double submit, the form sent
again, or ``manage.py resumeerasures`` after a worker was killed mid-run) only finishes the work."""

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.tasks import TaskResult, task

from accounts import audit
from accounts.models import AuditEvent
from connections.oauth.mail import disconnect
from connections.services import remove_connection
from conversations.models import PENDING, Delivery, Message
from keys.services import revoke_key
from ops.pruning import delete_in_batches
from triggers.services import revoke_trigger


def delete_history(person: User) -> int | None:
    """Delete the person's messages (with their deliveries, texts and the assistant's tool calls), but for those
    still on their way to the assistant, which a worker may be handing over right now. Returns how many when the
    task ran at once (the immediate backend), None when it is left to the worker."""
    newest = Message.objects.filter(conversation__user=person).order_by("-pk").values_list("pk", flat=True).first()
    return _finished(erase.enqueue(person.pk, account=False, up_to=newest or 0))


def delete_account(person: User) -> bool:
    """Close the account, then have it deleted: its keys and triggers revoked (refused from their next request), its
    pending approvals withdrawn, its connections removed (their OAuth tokens revoked at the provider where it offers
    revocation), here; then its messages and audit log in batches, and the account with what is left, by the task.
    Returns whether the account is gone already (the task ran at once)."""
    for key in person.api_keys.filter(revoked_at__isnull=True):
        revoke_key(key, by=audit.CONSOLE)
    for trigger in person.webhook_triggers.filter(revoked_at__isnull=True):
        revoke_trigger(trigger, by=audit.CONSOLE)
    person.is_active = False
    try:
        with transaction.atomic():  # a savepoint: a caller's transaction stays usable when the row is gone
            person.save(update_fields=["is_active"])  # withdraws what it still waits to approve (assistant/signals.py)
    except User.NotUpdated:
        return True  # a second submit of the form (a double click): the first deleted the account meanwhile
    for connection in person.mcp_connections.all():
        remove_connection(connection, by=audit.CONSOLE)
    for grant in person.oauth_grants.all():
        disconnect(grant, by=audit.CONSOLE)
    return _finished(erase.enqueue(person.pk, account=True)) is not None


@task
def erase(person_id: int, account: bool, up_to: int | None = None) -> int:
    """One run: the person's messages in batches for at most PRUNE_RUN_SECONDS; once none is left, for an account,
    its audit log, then the account row (nothing big is left for it to cascade to). While something is left, the
    next run is enqueued. Returns how many messages this run, and the runs it ran at once, deleted."""
    person = User.objects.filter(pk=person_id).first()
    if person is None or (account and person.is_active):
        return 0  # deleted by an earlier run, or opened again by staff since
    thread = Message.objects.filter(conversation__user=person)
    if not account:  # the history as it was when the person asked: a key sending on is not chased for ever
        thread = thread.filter(pk__lte=up_to or 0).exclude(delivery__status__in=PENDING)
    deleted = _delete_messages(thread)
    if thread.exists() or (account and not _delete_account_row(person)):
        return deleted + (_finished(erase.enqueue(person_id, account=account, up_to=up_to)) or 0)
    return deleted


def _finished(result: TaskResult) -> int | None:
    """What the task returned, when the backend ran it at once (raising if it failed); None when a worker will."""
    return int(result.return_value) if result.is_finished else None


def _delete_account_row(person: User) -> bool:
    """The audit log in batches, then the account: whether it is gone (not yet when the run's time ran out)."""
    log = AuditEvent.objects.filter(account=person)
    delete_in_batches(log, oldest_first=("account", "-at"))
    if log.exists():
        return False
    person.delete()
    return True


def _delete_messages(messages: QuerySet[Message]) -> int:
    return delete_in_batches(messages, oldest_first=("conversation", "created_at", "id"), before_delete=_held)


def _held(ids: list[int]) -> None:
    """Lock a batch's messages and deliveries before their rows are read for deleting: a worker still busy with one
    (an account deleted with messages on their way) then waits to write a row for it (the assistant's tool call, a
    text) until the batch is gone, rather than write it between that read and the delete, which would fail the batch
    on the row's foreign key as it commits."""
    list(Delivery.objects.select_for_update().filter(message_id__in=ids).values_list("pk", flat=True))
    list(Message.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
