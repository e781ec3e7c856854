"""The person's answer to an action the assistant asked approval for (assistant/approval/requests.py). Approved: a
message of theirs in the thread with its delivery, which carries the action out before the assistant goes on. Denied:
the assistant says it did not do it. Either way once, under the action's row lock, and in the audit log."""

import enum

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts import audit
from accounts.models import AuditKind
from assistant.approval import askers
from assistant.approval import requests as approvals
from assistant.models import Action, ActionState
from conversations.models import Endpoint, Source
from conversations.services import assistant_message
from ingestion.hotpath.recording import record_user_message


class Answer(enum.Enum):
    APPROVED = "approved"
    DENIED = "denied"
    TOO_LATE = "too late"  # it expired before the answer
    ALREADY = "already answered"
    WITHDRAWN = "withdrawn"  # what asked for it is gone: a key revoked, expired or rolled, a trigger or a connection
    # removed, the account deactivated (assistant/approval/askers.py)


# What the person is told of their answer, one sentence each (the console; a phone's reply may use the same words).
SAID = {
    Answer.APPROVED: "Approved: the assistant carries it out now and tells you the result in the thread.",
    Answer.DENIED: "Denied: it was not done.",
    Answer.TOO_LATE: "Too late: the request had expired, so it was not done.",
    Answer.ALREADY: "This request was answered already.",
    Answer.WITHDRAWN: (
        "Too late: what asked for it (a key, a webhook trigger or a connection) is gone, so it can no longer be "
        "approved. Nothing was done; the thread says why."
    ),
}


def pending_of(user: User, action_id: int) -> Action | None:
    """The person's own action that asked for approval (another's is as absent as one that never existed)."""
    return (
        Action.objects.select_related("delivery__message__api_key", "delivery__message__trigger")
        .filter(pk=action_id, delivery__conversation__user=user, approval_message__isnull=False)
        .first()
    )


def answer(user: User, action: Action, approve: bool, *, by: str = audit.CONSOLE) -> Answer:
    """The person's answer, from wherever it came (``by``: audit.CONSOLE, or audit.from_phone("Telegram")). The first
    answer wins: the state changes by a conditional UPDATE, so of two answers racing (a tap on the phone and a click
    in the console) exactly one finds the request still waiting; the other is told ALREADY. Past its time it is
    TOO_LATE, and once what asked for it is gone, WITHDRAWN (a request dies with its asker,
    assistant/approval/requests.py)."""
    now = timezone.now()
    with transaction.atomic():
        locked = Action.objects.select_for_update().get(pk=action.pk)
        if locked.state == ActionState.EXPIRED:  # by its time, or withdrawn when its asker went
            return Answer.WITHDRAWN if approvals.was_withdrawn(locked) else Answer.TOO_LATE
        if locked.state != ActionState.AWAITING_APPROVAL:
            return Answer.ALREADY
        if locked.approval_expires_at is not None and locked.approval_expires_at <= now:
            approvals.expire(locked, now)
            return Answer.TOO_LATE
        why = askers.gone(askers.with_origin().get(pk=locked.pk), now)
        if why is not None:
            approvals.withdraw(locked, why, now)
            return Answer.WITHDRAWN
        decided = ActionState.APPROVED if approve else ActionState.DENIED
        won = Action.objects.filter(pk=locked.pk, state=ActionState.AWAITING_APPROVAL).update(
            state=decided, decided_at=now
        )
        if not won:  # SQLite takes no row lock: another answer changed it between the read and here
            return Answer.ALREADY
        locked.state, locked.decided_at = decided, now
        what = f"{approvals.describe(locked)}, asked for by {locked.requested_by}"
        origin = action.delivery.message
        if approve:
            audit.record(user, AuditKind.APPROVAL_GIVEN, what, by=by)
            record_user_message(
                user=user,
                endpoint=Endpoint.APPROVAL,
                text=f"Approved: {approvals.describe(locked)}.",
                context={approvals.APPROVED_CONTEXT: locked.pk},
                api_key=origin.api_key,  # what it goes on to do stays under the same key's rules
                trigger=origin.trigger,
                notes_key_use=False,
            )
            return Answer.APPROVED
        audit.record(user, AuditKind.APPROVAL_DENIED, what, by=by)
        assert action.delivery.conversation_id is not None
        assistant_message(
            action.delivery.conversation_id,
            f"You denied it, so I did not do it: {approvals.describe(locked)}.",
            source=Source.ASSISTANT,
            context={"approvalDenied": locked.pk},
        )
        return Answer.DENIED
