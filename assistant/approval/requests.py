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

import logging
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.dispatch import Signal
from django.urls import reverse
from django.utils import timezone

from accounts import audit
from accounts.models import AuditKind, Profile
from assistant.approval import askers
from assistant.approval import codes as approval_codes
from assistant.approval import text as approval_text
from assistant.models import Action, ActionState
from connections.models import Connection
from conversations.models import Delivery, Message, Source
from conversations.outbound import NOT_TEXTED
from conversations.services import assistant_message
from keys.models import ApiKey
from ops.limits import count_in_window
from triggers.models import WebhookTrigger

# Sent after the commit that ended a request unanswered, with ``action_id`` and ``outcome`` ("expired" or
# "withdrawn"): whoever showed the request somewhere else (a Telegram message with buttons, channels/approvals.py)
# rewrites it. A signal, because those layers sit above this one (docs/explanation/architecture.md#the-layers).
request_ended = Signal()

logger = logging.getLogger(__name__)

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
    (assistant/approval/text.py), with a code that names this request alone (assistant/approval/codes.py). The first
    APPROVAL_TEXTS_PER_WINDOW requests of a window go to the phone one by one; the next one sends one text saying more
    wait, and the rest stay in the thread until the window ends."""
    with transaction.atomic():
        locked = Action.objects.select_for_update().select_related("delivery").get(pk=action.pk)
        if locked.approval_message_id is not None or locked.state != ActionState.AWAITING_APPROVAL:
            return
        conversation_id = locked.delivery.conversation_id
        assert conversation_id is not None  # a delivery of a message is in its thread
        locked.approval_code = _new_code(conversation_id)
        texts = _texts_in_window(conversation_id)
        context: dict[str, object] = {APPROVAL_CONTEXT: locked.pk}
        if texts > settings.APPROVAL_TEXTS_PER_WINDOW:
            context[NOT_TEXTED] = True
        message = assistant_message(
            conversation_id,
            approval_text.request_text(locked, zone_of(locked)),
            source=Source.ASSISTANT,
            context=context,
        )
        Action.objects.filter(pk=locked.pk).update(approval_message=message, approval_code=locked.approval_code)
        if texts == settings.APPROVAL_TEXTS_PER_WINDOW + 1:
            _say_more_wait(conversation_id, locked)


def _texts_in_window(conversation_id: int) -> int:
    """This request's place among the requests texted to the person in the current window (1, 2, ...). Without
    Redis the request is texted: asking must not fail for want of a counter."""
    try:
        return count_in_window(f"approval-texts:{conversation_id}", settings.APPROVAL_TEXT_WINDOW_SECONDS)
    except Exception:  # the cache's own errors (redis-py's), whatever the backend
        logger.warning("approval texts not counted: the cache did not answer")
        return 1


def _say_more_wait(conversation_id: int, latest: Action) -> None:
    """The one text of a window past its first requests: how many wait, who asked for the latest, where to see them."""
    waiting = Action.objects.filter(
        delivery__conversation_id=conversation_id, state=ActionState.AWAITING_APPROVAL
    ).count()
    minutes = max(settings.APPROVAL_TEXT_WINDOW_SECONDS // 60, 1)
    thread = settings.PUBLIC_BASE_URL + reverse("conversations:thread")
    assistant_message(
        conversation_id,
        f"{waiting} requests wait for your answer, the latest from {_asker_name(latest)}. I will not text each new "
        f"one for the next {minutes} minutes; see them all in the thread: {thread}",
        source=Source.ASSISTANT,
        context={"approvalsWaiting": waiting},
    )


def _asker_name(action: Action) -> str:
    message = Message.objects.select_related("api_key", "trigger").get(pk=action.delivery.message_id)
    if message.api_key is not None:
        return f"the API key “{message.api_key.name}”"
    if message.trigger is not None:
        return f"the webhook trigger “{message.trigger.condition[:60]}”"
    return "words from outside you"


# A handle is not given again in the same thread within this many days (while one is free): a reply or a button
# press on an old request then names no newer one (and would not match its secret if it did).
APPROVAL_CODE_DAYS = 30


def _new_code(conversation_id: int) -> str:
    """A code whose handle none of this thread's open requests has, nor (while one is free) any of the last
    APPROVAL_CODE_DAYS: a reply names exactly one request (assistant/approval/codes.py)."""
    asked = Action.objects.filter(delivery__conversation_id=conversation_id).exclude(approval_code="")
    recent = asked.filter(started_at__gte=timezone.now() - timedelta(days=APPROVAL_CODE_DAYS))
    taken = {approval_codes.handle_of(code) for code in recent.values_list("approval_code", flat=True)}
    if len(taken) >= approval_codes.HANDLES:
        open_now = asked.filter(state=ActionState.AWAITING_APPROVAL).values_list("approval_code", flat=True)
        taken = {approval_codes.handle_of(code) for code in open_now}
    return approval_codes.new_code(taken)


def waiting_like(delivery_id: int, tool: str, connection_name: str, arguments: object) -> Action | None:
    """A request of the same person for the same call (tool, connection, arguments) still waiting: a second one is
    not asked, the first stands for both."""
    conversation = Delivery.objects.filter(pk=delivery_id).values_list("conversation_id", flat=True)
    same = Action.objects.filter(
        delivery__conversation_id__in=conversation,
        state=ActionState.AWAITING_APPROVAL,
        tool=tool,
        connection_name=connection_name,
    ).order_by("pk")
    return next((action for action in same if action.arguments == arguments), None)


def no_room(delivery_id: int) -> str:
    """Why a new request may not be asked for this delivery's message ("" when it may), as what already waits: too
    many from its key or trigger (APPROVAL_OPEN_PER_ASKER, its follow-ups and approvals included), for the person
    (APPROVAL_OPEN_PER_PERSON), or that one message led to (APPROVAL_OPEN_PER_MESSAGE, through its tools'
    follow-ups). Counted without a lock: a key's or a trigger's messages, their follow-ups and approvals all go to
    one person's thread, whose messages are answered one at a time (docs/explanation/delivery.md)."""
    delivery = Delivery.objects.select_related("message__api_key", "message__trigger").filter(pk=delivery_id).first()
    if delivery is None or delivery.conversation_id is None:
        return ""
    message = delivery.message
    waiting = Action.objects.filter(
        state=ActionState.AWAITING_APPROVAL, delivery__conversation_id=delivery.conversation_id
    )
    limit = settings.APPROVAL_OPEN_PER_ASKER
    if message.api_key is not None and waiting.filter(delivery__message__api_key=message.api_key).count() >= limit:
        return f"{limit} requests from the API key “{message.api_key.name}”"
    if message.trigger is not None and waiting.filter(delivery__message__trigger=message.trigger).count() >= limit:
        return f"{limit} requests from this webhook trigger"
    if waiting.count() >= settings.APPROVAL_OPEN_PER_PERSON:
        return f"{settings.APPROVAL_OPEN_PER_PERSON} requests"
    if _led_by_one_message(message, waiting) >= settings.APPROVAL_OPEN_PER_MESSAGE:
        return f"{settings.APPROVAL_OPEN_PER_MESSAGE} requests that one message led to"
    return ""


def _led_by_one_message(message: Message, waiting: QuerySet[Action]) -> int:
    """How many of the waiting requests (fewer than APPROVAL_OPEN_PER_PERSON) the message that began ``message``'s
    cascade led to, itself and every follow-up down from it."""
    root = askers.root_message_id(message)
    return sum(
        1
        for action in waiting.select_related("delivery__message")
        if askers.root_message_id(action.delivery.message) == root
    )


def not_asked(delivery_id: int, waiting: str) -> str:
    """A call past the caps (``waiting``: what ``no_room`` said): the thread says once for the message that nothing
    new was asked (there only: the requests that wait were texted already), and the model is told why."""
    thread = Delivery.objects.filter(pk=delivery_id).values_list("conversation_id", flat=True).first()
    if (
        thread is not None
        and not Message.objects.filter(conversation_id=thread, context__approvalsFull=delivery_id).exists()
    ):
        assistant_message(
            thread,
            f"I asked you nothing new for this message: {waiting} already wait for your answer, the most that may "
            "wait. Answer those in the thread first.",
            source=Source.ASSISTANT,
            context={"approvalsFull": delivery_id, NOT_TEXTED: True},
        )
    return (
        f"Not done, and not asked: {waiting} already wait for the person's answer, the most that may wait. Nothing "
        "new is asked until they answer those. Do not call it again; tell them their requests wait in the thread."
    )


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
