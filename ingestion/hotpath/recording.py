"""Recording a person's message: the message and its delivery (the delivery queue's entry), written together
(on PostgreSQL in one statement, ``inserts``). Every entry point (the two endpoints, the console) records messages
through here."""

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Model

from conversations.models import Endpoint, Message, Role, Source
from conversations.services import conversation_of
from delivery import lifecycle
from delivery.tasks import enqueue_delivery
from ingestion.hotpath import recent
from ingestion.hotpath.inserts import Condition, Update, insert_together
from ingestion.models import TriggerFiring
from keys.models import ApiKey
from keys.services import note_key_used
from triggers.models import WebhookTrigger

_SOURCE_OF_ENDPOINT = {
    Endpoint.CURRENT: Source.API,
    Endpoint.LEGACY: Source.LEGACY_WEBHOOK,
    Endpoint.CONSOLE: Source.APP,
    Endpoint.WEBHOOK_TRIGGER: Source.WEBHOOK_TRIGGER,
    Endpoint.FOLLOW_UP: Source.TOOL_FOLLOW_UP,
    Endpoint.APPROVAL: Source.APPROVAL,
    Endpoint.CHANNEL: Source.SMS,  # the caller names the channel (``source``)
}


def record_user_message(
    *,
    user: User,
    endpoint: Endpoint,
    text: str,
    context: dict[str, Any] | None = None,
    api_key: ApiKey | None = None,
    request_id: str = "",
    confirm_key: bool = False,
    trigger: WebhookTrigger | None = None,
    source: Source | None = None,
    notes_key_use: bool = True,
    log_line: TriggerFiring | None = None,
    log_trim: Condition | None = None,
    only_if: Condition | None = None,
    along: Callable[[Message], Sequence[Model]] | None = None,
    updates: Sequence[Update] = (),
    before_writing: Callable[[], None] | None = None,
) -> Message:
    """Record a message in the user's thread and its delivery record (with the database task backend, the delivery
    queue's entry: delivery/queue.py), together or not at all
    (docs/design.md#conversations-and-the-hand-off): on PostgreSQL in one statement.

    ``confirm_key``: ``api_key`` was remembered, not looked up (ingestion/hotpath/recent.py); the rows are written only
    if it
    still holds, else nothing is and ``recent.NoLongerHolds`` is raised.

    ``trigger``: the webhook trigger whose firing this is (then there is no key).

    ``source``: where the person wrote it, when the endpoint alone does not say (a linked channel: sms, ...).

    ``notes_key_use``: False where the key is only the message's origin, not its sender (the person's approval of
    what the key asked for).

    ``log_line``: the trigger's delivery log line for this firing (ingestion/trigger_log.py), written with the
    message and pointing at it, and ``log_trim`` the statement that keeps the log short, run with them.

    ``only_if``: a condition of the caller's own (instead of ``confirm_key``'s): nothing is written unless it holds,
    and ``recent.NoLongerHolds`` is raised. ``along``: more new rows written with the message (given the unsaved
    message, which they may point at), all or none; ``updates``: changes to existing rows made with them
    (ingestion.hotpath.inserts). A channel's message uses all three (channels/inbound.py).

    ``before_writing``: called once the rows are made, just before they are written; what it raises stops the
    writing (the ordinary API request reads its rate limit's answer there: ingestion/views.py)."""
    # Keys by id rather than by instance: nothing reads the related objects back from these rows, and setting an
    # instance goes through Django's related-object descriptor (type and router checks, caches) for each.
    api_key_id = None if api_key is None else api_key.pk
    conversation = conversation_of(user)
    message = Message(
        conversation_id=conversation.pk,
        role=Role.TOOL if endpoint == Endpoint.FOLLOW_UP else Role.USER,
        source=source or _SOURCE_OF_ENDPOINT[endpoint],
        text=text,
        context=context,
        api_key_id=api_key_id,
        trigger_id=None if trigger is None else trigger.pk,
    )
    delivery = lifecycle.accepted(
        message=message,
        conversation_id=conversation.pk,
        api_key_id=api_key_id,
        endpoint=endpoint,
        request_id=request_id,
    )
    rows: list[Model] = [message, delivery]
    if log_line is not None:
        log_line.message = message  # an instance, as for the delivery
        rows.append(log_line)
    if along is not None:
        rows.extend(along(message))
    if confirm_key:
        assert api_key is not None and only_if is None
        only_if = recent.still_holds(api_key, conversation)
    if before_writing is not None:
        before_writing()
    if not insert_together(rows, only_if, log_trim, updates):
        raise recent.NoLongerHolds()
    # The database queue: nothing (the delivery row is the queue's entry); another task backend: its task.
    enqueue_delivery(message.public_id)
    if api_key is not None and notes_key_use:
        note_key_used(api_key)
    return message
