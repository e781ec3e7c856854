"""A person deletes their history or their account from the console (docs/howto/use-the-console.md, "Delete your
history or your account"). Messages are the person's history and are kept until they say so; then they go in batches
(ops/pruning.py), each batch its own short transaction, so a thread of any length is deleted without a long lock."""

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from accounts import audit
from accounts.models import AuditEvent
from connections.oauth.mail import disconnect
from connections.services import remove_connection
from conversations.models import PENDING, Delivery, Message
from conversations.services import conversation_of
from keys.services import revoke_key
from ops.pruning import delete_in_batches
from triggers.services import revoke_trigger


def delete_history(person: User) -> int:
    """Delete the person's messages (with their deliveries, texts and the assistant's tool calls), but for those
    still on their way to the assistant, which a worker may be handing over right now. Returns how many."""
    thread = conversation_of(person).messages.exclude(delivery__status__in=PENDING)
    return _delete_messages(thread)


def delete_account(person: User) -> None:
    """Close the account, then delete it: its keys and triggers revoked (refused from their next request), its
    pending approvals withdrawn, its connections removed (their OAuth tokens revoked at the provider where it offers
    revocation), then its messages and audit log in batches, and the account with what is left."""
    for key in person.api_keys.filter(revoked_at__isnull=True):
        revoke_key(key, by=audit.CONSOLE)
    for trigger in person.webhook_triggers.filter(revoked_at__isnull=True):
        revoke_trigger(trigger, by=audit.CONSOLE)
    person.is_active = False
    try:
        with transaction.atomic():  # a savepoint: a caller's transaction stays usable when the row is gone
            person.save(update_fields=["is_active"])  # withdraws what it still waits to approve (assistant/signals.py)
    except User.NotUpdated:
        return  # a second submit of the form (a double click): the first deleted the account meanwhile
    for connection in person.mcp_connections.all():
        remove_connection(connection, by=audit.CONSOLE)
    for grant in person.oauth_grants.all():
        disconnect(grant, by=audit.CONSOLE)
    _delete_messages(Message.objects.filter(conversation__user=person))
    delete_in_batches(AuditEvent.objects.filter(account=person), oldest_first=("account", "-at"))
    person.delete()


def _delete_messages(messages: QuerySet[Message]) -> int:
    return delete_in_batches(messages, oldest_first=("conversation", "created_at", "id"), before_delete=_held)


def _held(ids: list[int]) -> None:
    """Lock a batch's messages and deliveries before their rows are read for deleting: a worker still busy with one
    (an account deleted with messages on their way) then waits to write a row for it (the assistant's tool call, a
    text) until the batch is gone, rather than write it between that read and the delete, which would fail the batch
    on the row's foreign key as it commits."""
    list(Delivery.objects.select_for_update().filter(message_id__in=ids).values_list("pk", flat=True))
    list(Message.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
