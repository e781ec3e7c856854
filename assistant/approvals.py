"""Approval: a side-effecting tool that the assistant wants for a message from an API key or a webhook trigger is
not called. Its call is recorded in the delivery's ledger as ``awaiting_approval`` (assistant/tools/ledger.py), and
the assistant asks the person in the thread (``announce``: one message per call, however often it is replayed);
the person approves or denies in the console or from their phone (ingestion/approvals.py records the decision;
channels/approvals.py reads a phone's answer).

Approved, the decision is a message of the thread with a delivery of its own; when its attempt begins, whatever the
backend, ``assistant.backends.approved`` runs the approved call as that delivery's first call, through the same
ledger, so a worker killed during the attempt neither loses the call nor repeats it (a call it had begun is reported
as of unknown effect, as any other). The backend then gets the result as the message's text and the assistant goes on.
Denied, or left unanswered past ``APPROVAL_TIMEOUT_SECONDS``, the assistant says so in the thread and nothing runs.

Which calls wait is one decision, ``decide`` in assistant/approval/rule.py (docs/explanation/approval.md has it as a
table; assistant/approval/__init__.py draws a request's life). A request dies with its asker: ``withdraw_pending``.
"""

import secrets
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from accounts import audit
from accounts.models import AuditKind, Profile
from assistant import askers
from assistant.approval import text as approval_text
from assistant.models import Action, ActionState
from connections.models import Connection
from conversations.models import Delivery, Message, Source
from conversations.services import assistant_message
from keys.models import ApiKey
from triggers.models import WebhookTrigger

# Sent after the commit that ended a request unanswered, with ``action_id`` and ``outcome`` ("expired" or
# "withdrawn"): whoever showed the request somewhere else (a Telegram message with buttons, channels/approvals.py)
# rewrites it. A signal, because those layers sit above this one (docs/explanation/architecture.md#the-layers).
request_ended = Signal()

APPROVAL_CONTEXT = "approval"  # the asking message's context: {"approval": <action id>}
APPROVED_CONTEXT = "approvedAction"  # the decision's message: {"approvedAction": <action id>}


def expires_at() -> datetime:
    return timezone.now() + timedelta(seconds=settings.APPROVAL_TIMEOUT_SECONDS)


def describe(action: Action) -> str:
    """The call in a few words, one line, to go inside a sentence ("send an email to bob@example.com, subject
    “Running late”"): for the audit log and the assistant's "I did not do it" messages."""
    return approval_text.summary(action, zone_of(action))


def zone_of(action: Action) -> ZoneInfo:
    """The person's time zone (their profile's), in which the request says its times."""
    name = (
        Profile.objects.filter(user__conversation__deliveries__pk=action.delivery_id)
        .values_list("time_zone", flat=True)
        .first()
    )
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def announce(action: Action) -> None:
    """Ask the person in the thread, once per call (a replayed call finds its question already asked), in words
    (assistant/approval/text.py), with a short code they may answer with from a phone."""
    with transaction.atomic():
        locked = Action.objects.select_for_update().select_related("delivery").get(pk=action.pk)
        if locked.approval_message_id is not None or locked.state != ActionState.AWAITING_APPROVAL:
            return
        assert locked.delivery.conversation_id is not None  # a delivery of a message is in its thread
        locked.approval_code = _new_code(locked.delivery.conversation_id)
        message = assistant_message(
            locked.delivery.conversation_id,
            approval_text.request_text(locked, zone_of(locked)),
            source=Source.ASSISTANT,
            context={APPROVAL_CONTEXT: locked.pk},
        )
        Action.objects.filter(pk=locked.pk).update(approval_message=message, approval_code=locked.approval_code)


# A code is not given again in the same thread within this many days: a reply or a button press on an old request
# then cannot answer a newer one by chance.
APPROVAL_CODE_DAYS = 30


def _new_code(conversation_id: int) -> str:
    """Four random digits that none of this thread's requests of the last APPROVAL_CODE_DAYS had."""
    taken = set(
        Action.objects.filter(
            delivery__conversation_id=conversation_id,
            started_at__gte=timezone.now() - timedelta(days=APPROVAL_CODE_DAYS),
        )
        .exclude(approval_code="")
        .values_list("approval_code", flat=True)
    )
    for _ in range(100):
        code = f"{1000 + secrets.randbelow(9000)}"
        if code not in taken:
            return code
    return f"{1000 + secrets.randbelow(9000)}"  # 9,000 codes all taken within the month: a reused one then


def told_to_the_model(action: Action) -> str:
    """What the model hears for a call that waits for, or got, the person's answer."""
    state = action.state
    if state == ActionState.AWAITING_APPROVAL:
        return (
            "Not done: this action sends mail, or changes something after words from outside the person (an "
            "automation's message, or words a tool returned), so the person must approve it first. They have been "
            "asked in the thread. Do not call it again; tell them it awaits their approval."
        )
    if state == ActionState.APPROVED:
        return "The person approved this action; it is carried out separately. Do not call it again."
    if state == ActionState.DENIED:
        return "The person denied this action: it was not done. Do not call it again."
    return "The person did not answer in time: the action was not done. Do not call it again."


def approved_action(message_id: str) -> Action | None:
    message = Message.objects.filter(public_id=message_id).first()
    if message is None or not isinstance(message.context, dict):
        return None
    action_id = message.context.get(APPROVED_CONTEXT)
    if not isinstance(action_id, int):
        return None
    return Action.objects.filter(pk=action_id, state=ActionState.APPROVED).select_related("connection").first()


def expire_overdue(now: datetime | None = None) -> int:
    """Answer for the person who did not: every call still awaiting approval past its time is expired, and the
    assistant says so in the thread; and every request whose asker went without telling (a key that expired) is
    withdrawn. Returns how many."""
    now = now or timezone.now()
    expired = 0
    for action in Action.objects.filter(state=ActionState.AWAITING_APPROVAL, approval_expires_at__lte=now):
        expired += expire(action, now)
    for action in askers.orphaned(now):
        expired += withdraw(action, askers.gone(action, now) or "what asked for it is gone", now)
    return expired


def withdraw_pending(
    *,
    why: str,
    key: ApiKey | None = None,
    trigger: WebhookTrigger | None = None,
    connection: Connection | None = None,
    user: User | None = None,
) -> int:
    """A request dies with its asker: every request still waiting that this key, trigger, connection or account
    asked for is expired now (in the caller's transaction), said in the thread and in the audit log. Returns how
    many. Called when a key is revoked or rolled, a trigger or a connection removed, an account deactivated
    (ops/signals.py); a key's expiry is found by the sweep (``expire_overdue``), and an answer checks again."""
    withdrawn = 0
    for action in askers.pending(key=key, trigger=trigger, connection=connection, user=user):
        withdrawn += withdraw(action, why)
    return withdrawn


def was_withdrawn(action: Action) -> bool:
    """Whether an expired request was withdrawn (its asker went) rather than left unanswered: the thread says so."""
    conversation = Delivery.objects.filter(pk=action.delivery_id).values_list("conversation_id", flat=True)
    thread = Message.objects.filter(conversation_id__in=conversation, created_at__gte=action.started_at)
    return thread.filter(context__approvalWithdrawn=action.pk).exists()  # the thread's index, not every message


def withdraw(action: Action, why: str, now: datetime | None = None) -> bool:
    """Expire one waiting request because what asked for it is gone (``why``, in the person's words)."""
    return _end_unanswered(
        action,
        Q(),
        now or timezone.now(),
        ended="withdrawn",
        said=f"I did not do it, and it can no longer be approved: {describe(action)}. The reason: {why}.",
        context={"approvalWithdrawn": action.pk},
        logged=f"{describe(action)}, asked for by {action.requested_by}: withdrawn, {why}",
    )


def expire(action: Action, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    return _end_unanswered(
        action,
        Q(approval_expires_at__lte=now),
        now,
        ended="expired",
        said=f"Nobody answered in time, so I did not do it: {describe(action)}.",
        context={"approvalExpired": action.pk},
        logged=f"{describe(action)}, asked for by {action.requested_by}",
    )


def _end_unanswered(
    action: Action, still: Q, now: datetime, *, ended: str, said: str, context: dict[str, int], logged: str
) -> bool:
    """Expired or withdrawn (``ended``): the request ends unanswered (only if it still waits and `still` holds), the
    thread says so, the audit log keeps it, and after the commit ``request_ended`` tells where else it was shown;
    False when someone answered or ended it first."""
    with transaction.atomic():
        changed = Action.objects.filter(still, pk=action.pk, state=ActionState.AWAITING_APPROVAL).update(
            state=ActionState.EXPIRED, decided_at=now
        )
        if not changed:
            return False
        delivery = Delivery.objects.select_related("conversation").get(pk=action.delivery_id)
        assert delivery.conversation is not None and delivery.conversation_id is not None
        assistant_message(delivery.conversation_id, said, source=Source.ASSISTANT, context=context)
        audit.record(delivery.conversation.user_id, AuditKind.APPROVAL_EXPIRED, logged, by=audit.SYSTEM)
        transaction.on_commit(lambda: request_ended.send(sender=Action, action_id=action.pk, outcome=ended))
    return True
