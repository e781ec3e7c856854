"""The life cycle of a delivery, and every write of an assistant's reply: the one module that writes a delivery's
state (status, attempts, takeovers, lease, times, last error, reply) and its reply into the thread. The engine, the
in-process task, the callback endpoint and staff retries all come here; nothing else writes those columns. (An
assistant message that answers no delivery, a reminder firing, is written by
``conversations.services.assistant_message``, the function this module's ORM path uses too: reminders sit below
delivery in the layers.)

::

                 accepted ``accepted`` (the API's one statement writes it with the message)
                    │
                    ▼
    ┌──────────► queued ◄───────────────────────────────┐
    │               │ claimed ``claim``: due, the head of   │ retried ``retry_later``: a transient failure,
    │               │ its thread (attempt n+1, a lease)     │ attempts left (next_attempt_at = backoff)
    │               ▼                                     │
    │  put back ─ processing ─────────────────────────────┘
    │  ``put_back`` │  │  │ renewed ``renew``: every third of a lease while the worker lives
    │  (SIGTERM,    │  │  └──► taken over (``claim``): lease expired (worker dead) → processing, attempt n+1,
    │  uncounted)   │  │       takeovers+1; after DELIVERY_MAX_TAKEOVERS failed ``fail_exhausted``
    │               │  └──► failed ``failed``: a permanent failure, or the last attempt failed
    │               └─────► delivered ``delivered``: a reply (into the thread), or accepted by the runtime (the
    │                       reply comes by callback, ``record_callback_reply``, which writes the same columns)
    │
    └─ staff retry ``queue_again`` (admin, retrydeliveries): failed → queued, a fresh round; queued/abandoned →
       queued, same count

Which of retried, failed and put back an attempt's outcome becomes is decided in one place for every queue:
delivery/queue_worker.py ``settle``; the column writes each state change makes are delivery/leases.py's, shared
with the outbox (channels/outbound/queue.py), whose rows live the same life.

A reply by callback marks the delivery delivered from any state (a reply proves the message arrived).

**Who holds a delivery.** A claim makes it ``processing`` under a lease and counts the attempt; the attempt number is
the claim's token. Every outcome is written only while that attempt still holds the delivery (same attempt number,
still processing), so a worker that comes back after a takeover (a lost machine that reconnects) writes nothing.

The policy (lease, renewal, backoff, takeover limit) is delivery/leases.py's, built here from the DELIVERY_*
and ASSISTANT_RETRY_* settings (``policy()``); see that module to reuse it for another queue.

The claim's SQL is here; delivery/queue.py turns what it returns into the assistant's request.
"""

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, F, PositiveIntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from conversations import outbound
from conversations.models import Conversation, Delivery, DeliveryStatus, Message, Source, new_message_id
from conversations.services import assistant_message
from delivery import leases
from keys.models import ApiKey

logger = logging.getLogger(__name__)

# A delivery "processing" with no lease (claimed by a release before leases) this long after its attempt started
# was abandoned. With a lease, its expiry says so.
STALE_PROCESSING = timedelta(minutes=15)


def policy() -> leases.LeasePolicy:
    return leases.LeasePolicy.from_settings(lease="DELIVERY", retry="ASSISTANT")


def unrenewed_lease_seconds() -> float:
    """The lease of an attempt nobody renews (the in-process task of the immediate backend and other task backends):
    as long as the longest attempt may take (a tool-using one) and a margin."""
    return float(
        max(settings.ASSISTANT_TIMEOUT_SECONDS, settings.ASSISTANT_TOOL_SECONDS + settings.ASSISTANT_TIMEOUT_SECONDS)
        + settings.DELIVERY_LEASE_MARGIN_SECONDS
    )


@dataclass(frozen=True, slots=True)
class Held:
    """An attempt that holds a delivery: the delivery and its attempt number (the claim's token)."""

    delivery_id: int
    attempt: int


def accepted(
    *, message: Message, conversation_id: int, api_key_id: int | None, endpoint: str, request_id: str
) -> Delivery:
    """Accepted: a message's delivery, queued and due at once, no attempt yet; unsaved, for the API's one statement
    that writes it with its message (ingestion/hotpath/recording.py)."""
    return Delivery(
        message=message,  # an instance: its key exists only once the statement has inserted it
        conversation_id=conversation_id,
        api_key_id=api_key_id,
        endpoint=endpoint,
        request_id=request_id,
        backend=settings.ASSISTANT_BACKEND,
        status=DeliveryStatus.QUEUED,
        attempts=0,
        takeovers=0,
    )


def _holding(held: Held) -> Any:
    return leases.holding(Delivery, held.delivery_id, held.attempt)


# --- claiming ---------------------------------------------------------------------------------------------------


def _tables() -> dict[str, str]:
    q = connection.ops.quote_name
    return {
        "delivery": q(Delivery._meta.db_table),
        "message": q(Message._meta.db_table),
        "conversation": q(Conversation._meta.db_table),
        "key": q(ApiKey._meta.db_table),
    }


_MARK_CLAIMED = """
    UPDATE {delivery}
    SET {assignments}, backend = %(backend)s, started_at = %(now)s, finished_at = NULL, updated_at = %(now)s
    WHERE id IN ({claimable})
    RETURNING id, message_id, attempts, backend
"""

# PostgreSQL: the claim and everything the attempts need, in one statement.
_CLAIM_WITH_REQUESTS = """
    WITH claimed AS ({mark_claimed})
    SELECT claimed.id, claimed.attempts, claimed.backend, m.public_id, m.text, m.context::text, m.source,
           m.created_at, conv.user_id, k.id, k.name, k.hint, thread.ids, thread.roles, thread.texts, thread.times,
           thread.replied_by
    FROM claimed
    JOIN {message} AS m ON m.id = claimed.message_id
    JOIN {conversation} AS conv ON conv.id = m.conversation_id
    LEFT JOIN {key} AS k ON k.id = m.api_key_id
    CROSS JOIN LATERAL (
        SELECT array_agg(t.public_id ORDER BY t.created_at, t.id) AS ids,
               array_agg(t.role ORDER BY t.created_at, t.id) AS roles,
               array_agg(t.text ORDER BY t.created_at, t.id) AS texts,
               array_agg(t.created_at ORDER BY t.created_at, t.id) AS times,
               array_agg(t.replied_by ORDER BY t.created_at, t.id) AS replied_by
        FROM (SELECT u.public_id, u.role, u.text, u.created_at, u.id,
                     COALESCE((SELECT r.backend FROM {delivery} AS r WHERE r.reply_id = u.id), '') AS replied_by
              FROM {message} AS u
              WHERE u.conversation_id = m.conversation_id AND (u.created_at, u.id) <= (m.created_at, m.id)
                    AND u.test = m.test
              ORDER BY u.created_at DESC, u.id DESC LIMIT %(thread)s) AS t
    ) AS thread
    ORDER BY claimed.id
"""


def _claim_sql() -> str:
    """The claim: the claimable deliveries (delivery/leases.py's per-thread rule: each thread's head, ready), locked,
    marked claimed, and on PostgreSQL returned with what their attempts need."""
    postgres = connection.vendor == "postgresql"
    claimable = leases.heads_sql(
        _tables()["delivery"],
        "conversation_id",
        lock="FOR UPDATE OF c SKIP LOCKED" if postgres else "",
        postgresql=postgres,
    )
    mark = _MARK_CLAIMED.format(claimable=claimable, assignments=leases.claim_assignments_sql(), **_tables())
    return _CLAIM_WITH_REQUESTS.format(mark_claimed=mark, **_tables()) if postgres else mark


_last_reaped = 0.0
_windows = leases.Windows()


def claim(limit: int, *, lease_seconds: float | None = None) -> list[tuple[Any, ...]]:
    """Claim up to ``limit`` claimable deliveries: each becomes processing under a lease (``lease_seconds``, by default
    DELIVERY_LEASE_SECONDS, which the claimer renews), its attempt counted (a takeover too, when its previous worker's
    lease had expired).

    Returns rows in delivery order: on PostgreSQL (delivery id, attempt, backend, then the message, its key and
    the recent thread, see ``_CLAIM_WITH_REQUESTS``), elsewhere (delivery id, message id, attempt, backend).
    Before claiming, deliveries whose takeovers are used up are failed (at most once a second per process), so that
    their threads move on."""
    if limit <= 0:
        return []
    global _last_reaped
    clock = timezone.now().timestamp()
    if clock - _last_reaped >= 1.0:
        _last_reaped = clock
        fail_exhausted()
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    params = {
        "now": adapt(now),
        "lease": adapt(now + timedelta(seconds=lease_seconds or policy().lease_seconds)),
        "max_takeovers": settings.DELIVERY_MAX_TAKEOVERS,
        "backend": settings.ASSISTANT_BACKEND,
        "thread": settings.ASSISTANT_THREAD_MESSAGES,
    }
    sql = _claim_sql()

    def run(from_thread: int, until_thread: int, wanted: int) -> list[tuple[Any, ...]]:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, {**params, "limit": wanted, "from_thread": from_thread, "until_thread": until_thread})
            return cursor.fetchall()

    rows = _windows.claim(run, limit, lambda: leases.highest_thread(_tables()["delivery"], "conversation_id"))
    return sorted(rows, key=lambda row: row[0])


def fail_exhausted() -> list[int]:
    """Fail the deliveries whose lease expired after DELIVERY_MAX_TAKEOVERS takeovers (a message that kills its
    worker); returns their ids."""
    now = timezone.now()
    reason = (
        f"Its worker was lost {settings.DELIVERY_MAX_TAKEOVERS + 1} times while attempting it (killed, out of memory, "
        "or cut off); given up so that the thread's later messages go on. Staff can retry it."
    )
    failed = leases.fail_exhausted(Delivery, policy(), reason, finished_at=now, next_attempt_at=None, updated_at=now)
    for delivery_id in failed:
        logger.warning("delivery %s failed: %s", delivery_id, reason)
    return failed


def renew(held: Sequence[Held]) -> set[int]:
    """Extend the leases of these attempts with one statement; returns the deliveries renewed."""
    return leases.renew(Delivery, [(h.delivery_id, h.attempt) for h in held], policy())


def renewals() -> leases.Renewals:
    return leases.Renewals(Delivery, policy())


# --- an attempt's outcome ---------------------------------------------------------------------------------------


# PostgreSQL: any number of attempts' outcomes in one statement. Each attempt that still holds its delivery gets its
# reply (when it brought one) into the thread and its delivery delivered.
_DELIVERED = """
    WITH input AS (
        SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[], %(public_ids)s::text[], %(texts)s::text[])
            AS i(id, attempt, public_id, text)
    ),
    held AS (
        SELECT d.id, d.reply_id, i.public_id, i.text, m.conversation_id, m.test
        FROM input AS i
        JOIN {delivery} AS d ON d.id = i.id AND d.status = 'processing' AND d.attempts = i.attempt
        JOIN {message} AS m ON m.id = d.message_id
        FOR UPDATE OF d
    ),
    reply AS (
        INSERT INTO {message} (public_id, conversation_id, role, source, text, context, api_key_id, created_at, test)
        SELECT held.public_id, held.conversation_id, 'assistant', 'assistant', held.text, NULL, NULL, %(now)s, held.test
        FROM held WHERE held.text IS NOT NULL AND held.reply_id IS NULL
        RETURNING id, public_id
    )
    UPDATE {delivery} AS d SET status = 'delivered', reply_id = COALESCE(reply.id, d.reply_id),
        next_attempt_at = NULL, finished_at = %(now)s, lease_expires_at = NULL, updated_at = %(now)s
    FROM held LEFT JOIN reply ON reply.public_id = held.public_id
    WHERE d.id = held.id
    RETURNING d.id, reply.id
"""


def delivered(outcomes: Sequence[tuple[Held, str | None]]) -> set[int]:
    """Delivered: the assistant took each message (and replied, when its text is given), for the attempts that still
    hold their delivery (not taken over after their lease expired, nor put back); returns the deliveries written.
    The one writer of an attempt's "delivered": on PostgreSQL one statement for all of them, elsewhere the ORM."""
    if not outcomes:
        return set()
    now = timezone.now()
    if connection.vendor != "postgresql":
        return {held.delivery_id for held, text in outcomes if _delivered_by_orm(held, text, now)}
    # In a transaction only when the replies must also be announced (conversations/outbound.py).
    with transaction.atomic() if outbound.wanted() else nullcontext(), connection.cursor() as cursor:
        cursor.execute(
            _DELIVERED.format(**_tables()),
            {
                "ids": [held.delivery_id for held, _ in outcomes],
                "attempts": [held.attempt for held, _ in outcomes],
                "public_ids": [new_message_id() for _ in outcomes],
                "texts": [text for _, text in outcomes],
                "now": now,
            },
        )
        rows = cursor.fetchall()
        outbound.written([int(row[1]) for row in rows if row[1] is not None])
        return {int(row[0]) for row in rows}


def _delivered_by_orm(held: Held, reply_text: str | None, now: datetime) -> bool:
    with transaction.atomic():
        delivery = _holding(held).select_for_update().select_related("message").first()
        if delivery is None:
            return False
        if delivery.reply_id is None and reply_text is not None:
            delivery.reply = _assistant_message(delivery.message, reply_text, now)
        _holding(held).update(reply=delivery.reply, **_delivered_columns(now))
        return True


def _delivered_columns(now: datetime) -> dict[str, Any]:
    """What "delivered" writes besides the reply (the ORM's writes; the PostgreSQL statement above says the same)."""
    return {
        "status": DeliveryStatus.DELIVERED,
        "next_attempt_at": None,
        "lease_expires_at": None,
        "finished_at": now,
        "updated_at": now,
    }


def retry_later(held: Held, error: str, next_attempt_at: datetime) -> bool:
    """Retried: a transient failure with attempts left; queued, due again at ``next_attempt_at``. One statement."""
    return leases.retried(Delivery, held.delivery_id, held.attempt, error, next_attempt_at, finished_at=timezone.now())


def failed(held: Held, error: str) -> bool:
    """Failed: a permanent failure, or the last attempt failed. One statement."""
    return leases.failed(Delivery, held.delivery_id, held.attempt, error, finished_at=timezone.now())


def put_back(held: Sequence[Held]) -> int:
    """Put back: attempts that could not finish before the worker stopped (SIGTERM), or never began; queued again,
    due at once, not counted. One statement per delivery (a stop puts back at most DELIVERY_CONCURRENCY of them)."""
    return sum(leases.put_back(Delivery, one.delivery_id, one.attempt, started_at=None) for one in held)


# --- from outside an attempt ------------------------------------------------------------------------------------


class ReplyAlreadyRecorded(Exception):
    """A callback brought a reply for a message whose reply is already in the thread."""


def record_callback_reply(message: Message, reply_text: str, callback_id: str) -> tuple[Delivery, bool]:
    """A reply the assistant runtime sent later. Returns the delivery and whether the reply is new; the same
    callback again (same webhook-id) changes nothing, another reply for the same message is refused. A reply
    proves the message arrived, whatever our side had concluded (a timeout, a scheduled retry): delivered."""
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update().select_related("message").get(message=message)
        if delivery.reply_id is not None:
            if delivery.callback_id == callback_id:
                return delivery, False
            raise ReplyAlreadyRecorded()
        now = timezone.now()
        delivery.reply = _assistant_message(delivery.message, reply_text, now)
        delivery.callback_id = callback_id
        columns = _delivered_columns(now)
        if delivery.status == DeliveryStatus.DELIVERED:
            del columns["finished_at"]  # an attempt still running (or a retry waiting) ends here; a finished one did
        for name, value in columns.items():
            setattr(delivery, name, value)
        delivery.save(update_fields=["reply", "callback_id", *columns])
        return delivery, True


def abandoned(now: datetime) -> Q:
    """Being attempted by a worker that is gone: its lease expired (or, claimed before leases, long ago)."""
    return Q(status=DeliveryStatus.PROCESSING) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, started_at__lt=now - STALE_PROCESSING)
    )


def due(grace: timedelta) -> QuerySet[Delivery]:
    """Deliveries that should have been attempted by now: a retry whose time has come (the immediate backend
    cannot defer one), a task that never got enqueued, an attempt whose worker died."""
    cutoff = timezone.now() - grace
    return Delivery.objects.filter(
        Q(status=DeliveryStatus.QUEUED, next_attempt_at__lte=cutoff)
        | Q(status=DeliveryStatus.QUEUED, next_attempt_at__isnull=True, created_at__lte=cutoff)
        | abandoned(timezone.now())
    )


def retryable(now: datetime) -> Q:
    return Q(status__in=[DeliveryStatus.FAILED, DeliveryStatus.QUEUED]) | abandoned(now)


def queue_again(delivery_id: int) -> bool:
    """Staff: give a failed, queued or abandoned delivery an attempt now. False if it is delivered or an attempt is
    in progress. Only a failed one starts a fresh round (its attempts and takeovers back to 0); a queued or abandoned
    one keeps its count, so the runtime never sees the same attempt number twice for a message it may already have
    received (a dead worker's attempt 1 is followed by attempt 2, not by another attempt 1)."""
    now = timezone.now()
    fresh = When(status=DeliveryStatus.FAILED, then=Value(0))
    return bool(
        Delivery.objects.filter(retryable(now), pk=delivery_id).update(
            status=DeliveryStatus.QUEUED,
            attempts=Case(fresh, default=F("attempts"), output_field=PositiveIntegerField()),
            takeovers=Case(fresh, default=F("takeovers"), output_field=PositiveIntegerField()),
            next_attempt_at=None,
            lease_expires_at=None,
            updated_at=now,
        )
    )


def _assistant_message(answered: Message, text: str, now: datetime) -> Message:
    return assistant_message(
        answered.conversation_id, text, source=Source.ASSISTANT, created_at=now, test=answered.test
    )
