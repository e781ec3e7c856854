"""The delivery queue: the delivery rows themselves, claimed in batches by the workers (delivery/engine.py).

A delivery is ready when it is queued and due (no ``next_attempt_at``, or that time has come), or when it is being
attempted under a lease that has expired (its worker died: kill -9, out of memory, a lost machine). It is claimable
when it is ready and first in its thread: no earlier delivery of the same thread is still pending (queued or being
attempted) and no later one is being attempted under a live lease. So a thread's messages reach the assistant one at
a time, in the order they were accepted, and different threads run in parallel.

A retry waiting for its backoff keeps its place: the thread's later messages wait behind it until it is delivered
or fails for good (as FIFO queues with message groups do). The assistant never sees a conversation out of order.

A claim is one statement on PostgreSQL: ``FOR UPDATE SKIP LOCKED`` picks up to N claimable rows that no other worker
is claiming at that moment, marks them processing with a lease, counts the attempt and returns everything the
attempt needs (the message, its key, the recent thread): no query per attempt. Each outcome is one statement too;
it applies only while the attempt still holds its claim (same delivery, still processing, same attempt number), so
an attempt whose lease expired and was taken over cannot overwrite what the newer attempt recorded.

Elsewhere (SQLite) the same claim runs without SKIP LOCKED (SQLite has one writer at a time anyway) and the
outcomes go through the ORM in a transaction.
"""

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from assistant.conversation import AssistantRequest, KeyInfo, ThreadEntry, build_request
from conversations.models import Conversation, Delivery, DeliveryStatus, Message, Role, Source, new_message_id
from keys.models import ApiKey

logger = logging.getLogger(__name__)

QUEUED, PROCESSING = DeliveryStatus.QUEUED.value, DeliveryStatus.PROCESSING.value


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed attempt: the delivery, the attempt number (the claim's token) and what to send."""

    delivery_id: int
    attempt: int
    backend: str
    request: AssistantRequest


def lease_seconds() -> float:
    """How long an attempt may hold its delivery before any worker may take it over: the attempt's own time limit
    and a margin for recording its outcome."""
    return float(settings.ASSISTANT_TIMEOUT_SECONDS + settings.DELIVERY_LEASE_MARGIN_SECONDS)


def _tables() -> dict[str, str]:
    q = connection.ops.quote_name
    return {
        "delivery": q(Delivery._meta.db_table),
        "message": q(Message._meta.db_table),
        "conversation": q(Conversation._meta.db_table),
        "key": q(ApiKey._meta.db_table),
    }


# The claimable deliveries, first in acceptance order (their ids), locked for this claim.
_CLAIMABLE = """
    SELECT c.id FROM {delivery} AS c
    WHERE ((c.status = 'queued' AND (c.next_attempt_at IS NULL OR c.next_attempt_at <= %(now)s))
           OR (c.status = 'processing' AND c.lease_expires_at < %(now)s))
      {only_one}
      AND NOT EXISTS (
          SELECT 1 FROM {delivery} AS e
          WHERE e.conversation_id = c.conversation_id AND e.status IN ('queued', 'processing') AND e.id <> c.id
            AND (e.id < c.id OR e.lease_expires_at >= %(now)s))
    ORDER BY c.id
    LIMIT %(limit)s
    {lock}
"""

_MARK_CLAIMED = """
    UPDATE {delivery}
    SET status = 'processing', attempts = attempts + 1, backend = %(backend)s, started_at = %(now)s,
        finished_at = NULL, next_attempt_at = NULL, lease_expires_at = %(lease)s, updated_at = %(now)s
    WHERE id IN ({claimable})
    RETURNING id, message_id, attempts, backend
"""

# PostgreSQL: the claim and everything the attempts need, in one statement.
_CLAIM_WITH_REQUESTS = """
    WITH claimed AS ({mark_claimed})
    SELECT claimed.id, claimed.attempts, claimed.backend, m.public_id, m.text, m.context::text, m.source,
           m.created_at, conv.user_id, k.id, k.name, k.hint, thread.ids, thread.roles, thread.texts, thread.times
    FROM claimed
    JOIN {message} AS m ON m.id = claimed.message_id
    JOIN {conversation} AS conv ON conv.id = m.conversation_id
    LEFT JOIN {key} AS k ON k.id = m.api_key_id
    CROSS JOIN LATERAL (
        SELECT array_agg(t.public_id ORDER BY t.created_at, t.id) AS ids,
               array_agg(t.role ORDER BY t.created_at, t.id) AS roles,
               array_agg(t.text ORDER BY t.created_at, t.id) AS texts,
               array_agg(t.created_at ORDER BY t.created_at, t.id) AS times
        FROM (SELECT u.public_id, u.role, u.text, u.created_at, u.id FROM {message} AS u
              WHERE u.conversation_id = m.conversation_id AND (u.created_at, u.id) <= (m.created_at, m.id)
              ORDER BY u.created_at DESC, u.id DESC LIMIT %(thread)s) AS t
    ) AS thread
    ORDER BY claimed.id
"""


def _claim_sql(*, only_one: bool) -> str:
    postgres = connection.vendor == "postgresql"
    claimable = _CLAIMABLE.format(
        only_one="AND c.id = %(id)s" if only_one else "",
        lock="FOR UPDATE OF c SKIP LOCKED" if postgres else "",
        **_tables(),
    )
    mark = _MARK_CLAIMED.format(claimable=claimable, **_tables())
    return _CLAIM_WITH_REQUESTS.format(mark_claimed=mark, **_tables()) if postgres else mark


def _params(limit: int, now: datetime, delivery_id: int | None = None) -> dict[str, Any]:
    adapt = connection.ops.adapt_datetimefield_value
    return {
        "now": adapt(now),
        "lease": adapt(now + timedelta(seconds=lease_seconds())),
        "limit": limit,
        "backend": settings.ASSISTANT_BACKEND,
        "thread": settings.ASSISTANT_THREAD_MESSAGES,
        "id": delivery_id,
    }


def claim(limit: int, delivery_id: int | None = None) -> list[Claim]:
    """Claim up to ``limit`` claimable deliveries (or only ``delivery_id``, if it is claimable): each becomes
    processing under a fresh lease, its attempt counted."""
    if limit <= 0:
        return []
    sql = _claim_sql(only_one=delivery_id is not None)
    params = _params(limit, timezone.now(), delivery_id)
    with transaction.atomic():  # one statement on PostgreSQL; on SQLite the claim and the reads together
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        if connection.vendor == "postgresql":
            return [_claim_of_row(row) for row in rows]
        return _claims_by_orm(rows)


def _claim_of_row(row: Sequence[Any]) -> Claim:
    (delivery_id, attempt, backend, public_id, text, context, source, created_at, user_id) = row[:9]
    key_id, key_name, key_hint, ids, roles, texts, times = row[9:]
    thread = [
        ThreadEntry(id=i, role=r, text=t, created_at=at.isoformat())
        for i, r, t, at in zip(ids, roles, texts, times, strict=True)
    ]
    request = AssistantRequest(
        message_id=public_id,
        text=text,
        context=None if context is None else json.loads(context),
        source=source,
        created_at=created_at.isoformat(),
        user_id=user_id,
        key=None if key_id is None else KeyInfo(id=key_id, name=key_name, hint=key_hint),
        thread=thread,
        attempt=attempt,
    )
    return Claim(delivery_id, attempt, backend, request)


def _claims_by_orm(rows: Sequence[Sequence[Any]]) -> list[Claim]:
    claims = []
    for delivery_id, message_id, attempt, backend in sorted(rows, key=lambda row: row[0]):
        message = Message.objects.select_related("conversation", "api_key").get(pk=message_id)
        claims.append(Claim(delivery_id, attempt, backend, build_request(message, attempt)))
    return claims


def _holding(claim: Claim) -> Any:
    """The delivery, while this attempt still holds it."""
    return Delivery.objects.filter(pk=claim.delivery_id, status=DeliveryStatus.PROCESSING, attempts=claim.attempt)


_DELIVERED_WITH_REPLY = """
    WITH reply AS (
        INSERT INTO {message} (public_id, conversation_id, role, source, text, context, api_key_id, created_at)
        SELECT %(public_id)s, m.conversation_id, 'assistant', 'assistant', %(text)s, NULL, NULL, %(now)s
        FROM {delivery} AS d JOIN {message} AS m ON m.id = d.message_id
        WHERE d.id = %(id)s AND d.status = 'processing' AND d.attempts = %(attempt)s AND d.reply_id IS NULL
        FOR UPDATE OF d
        RETURNING id
    )
    UPDATE {delivery} SET status = 'delivered', reply_id = COALESCE((SELECT id FROM reply), reply_id),
        next_attempt_at = NULL, finished_at = %(now)s, lease_expires_at = NULL, updated_at = %(now)s
    WHERE id = %(id)s AND status = 'processing' AND attempts = %(attempt)s
"""


def record_delivered(claim: Claim, reply_text: str | None) -> bool:
    """The assistant took the message (and replied, if ``reply_text``): one statement. False if the attempt had
    lost its claim (taken over after its lease expired, or put back)."""
    now = timezone.now()
    if reply_text is None:
        return bool(
            _holding(claim).update(
                status=DeliveryStatus.DELIVERED,
                next_attempt_at=None,
                finished_at=now,
                lease_expires_at=None,
                updated_at=now,
            )
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _DELIVERED_WITH_REPLY.format(**_tables()),
                {
                    "public_id": new_message_id(),
                    "text": reply_text,
                    "now": now,
                    "id": claim.delivery_id,
                    "attempt": claim.attempt,
                },
            )
            return cursor.rowcount == 1
    with transaction.atomic():
        delivery = _holding(claim).select_for_update().select_related("message").first()
        if delivery is None:
            return False
        if delivery.reply_id is None:
            delivery.reply = Message.objects.create(
                conversation_id=delivery.message.conversation_id,
                role=Role.ASSISTANT,
                source=Source.ASSISTANT,
                text=reply_text,
                created_at=now,
            )
        _holding(claim).update(
            status=DeliveryStatus.DELIVERED,
            reply=delivery.reply,
            next_attempt_at=None,
            finished_at=now,
            lease_expires_at=None,
            updated_at=now,
        )
        return True


_DELIVERED_WITH_REPLIES = """
    WITH input AS (
        SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[], %(public_ids)s::text[], %(texts)s::text[])
            AS i(id, attempt, public_id, text)
    ),
    held AS (
        SELECT d.id, i.public_id, i.text, m.conversation_id
        FROM input AS i
        JOIN {delivery} AS d ON d.id = i.id AND d.status = 'processing' AND d.attempts = i.attempt
                             AND d.reply_id IS NULL
        JOIN {message} AS m ON m.id = d.message_id
        FOR UPDATE OF d
    ),
    reply AS (
        INSERT INTO {message} (public_id, conversation_id, role, source, text, context, api_key_id, created_at)
        SELECT held.public_id, held.conversation_id, 'assistant', 'assistant', held.text, NULL, NULL, %(now)s
        FROM held
        RETURNING id, public_id
    )
    UPDATE {delivery} AS d SET status = 'delivered', reply_id = reply.id, next_attempt_at = NULL,
        finished_at = %(now)s, lease_expires_at = NULL, updated_at = %(now)s
    FROM held JOIN reply ON reply.public_id = held.public_id
    WHERE d.id = held.id
    RETURNING d.id
"""


def record_replies(replies: Sequence[tuple[Claim, str]]) -> set[int]:
    """PostgreSQL: several attempts that brought a reply, recorded by one statement (each reply into its thread and
    its delivery delivered, for the attempts that still hold their delivery). Returns the deliveries recorded."""
    with connection.cursor() as cursor:
        cursor.execute(
            _DELIVERED_WITH_REPLIES.format(**_tables()),
            {
                "ids": [claim.delivery_id for claim, _ in replies],
                "attempts": [claim.attempt for claim, _ in replies],
                "public_ids": [new_message_id() for _ in replies],
                "texts": [text for _, text in replies],
                "now": timezone.now(),
            },
        )
        return {int(row[0]) for row in cursor.fetchall()}


def record_retry(claim: Claim, error: str, next_attempt_at: datetime) -> bool:
    """A transient failure: back to queued, due again at ``next_attempt_at``. One statement."""
    return _record_unanswered(claim, DeliveryStatus.QUEUED, error, next_attempt_at)


def record_failed(claim: Claim, error: str) -> bool:
    """A permanent failure, or the last attempt failed: failed. One statement."""
    return _record_unanswered(claim, DeliveryStatus.FAILED, error, None)


def _record_unanswered(claim: Claim, status: str, error: str, next_attempt_at: datetime | None) -> bool:
    """An attempt that ended without a reply, written only while it still holds the delivery."""
    now = timezone.now()
    return bool(
        _holding(claim).update(
            status=status,
            next_attempt_at=next_attempt_at,
            finished_at=now,
            last_error=error,
            lease_expires_at=None,
            updated_at=now,
        )
    )


def put_back(claims: Sequence[Claim]) -> int:
    """Attempts that could not finish before the worker stopped (SIGTERM): queued again, due at once, and the attempt
    not counted. One statement per delivery (a stop puts back at most DELIVERY_CONCURRENCY of them)."""
    now = timezone.now()
    returned = 0
    for claim in claims:
        returned += _holding(claim).update(
            status=DeliveryStatus.QUEUED,
            attempts=F("attempts") - 1,
            started_at=None,
            next_attempt_at=None,
            lease_expires_at=None,
            updated_at=now,
        )
    return returned
