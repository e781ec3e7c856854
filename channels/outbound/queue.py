"""The outbox as a queue: rows claimed in batches by the channel workers (channels/outbound/sender.py), with the
delivery engine's guarantees, from the same policy module (conversations/leases.py): a claim holds a row under a
lease the worker renews; a row whose worker died is taken over once its lease expires, and failed after
CHANNEL_MAX_TAKEOVERS takeovers; failures retry with backoff; every outcome is written only while the attempt still
holds the row, so a worker that comes back late writes nothing.

One rule of its own: a row is claimable only when it is first among its person's pending rows, so a person's texts
leave in the order they were written (the parts of a long message in order too), one at a time, and different
people's in parallel. A row waiting for its backoff or for quiet hours to end keeps its place.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Profile
from channels.models import LinkedAddress, OutboundMessage, OutboundStatus, QuietHours
from conversations import leases
from conversations.models import Message


def policy() -> leases.LeasePolicy:
    return leases.LeasePolicy(
        lease_seconds=settings.CHANNEL_LEASE_SECONDS,
        max_takeovers=settings.CHANNEL_MAX_TAKEOVERS,
        max_attempts=settings.CHANNEL_MAX_ATTEMPTS,
        retry_base_seconds=settings.CHANNEL_RETRY_BASE_SECONDS,
        retry_max_seconds=settings.CHANNEL_RETRY_MAX_SECONDS,
        retry_jitter=settings.CHANNEL_RETRY_JITTER,
    )


@dataclass(frozen=True, slots=True)
class Claim:
    """One claimed send: the row, the attempt number (the claim's token) and all the sender needs to decide and send
    without touching the database."""

    row_id: int
    attempt: int
    channel: str
    address: str
    text: str
    reference: str  # stable per row: "<message public id>-<part>"
    time_zone: str
    quiet_starts: time | None
    quiet_ends: time | None
    last_inbound_at: datetime | None


_CLAIM = """
    UPDATE {outbox} SET {assignments}, updated_at = %(now)s
    WHERE id IN (
        SELECT c.id FROM {outbox} AS c
        WHERE {ready}
          AND NOT EXISTS (
              SELECT 1 FROM {outbox} AS e
              WHERE e.person_id = c.person_id AND e.status IN ('queued', 'processing') AND e.id < c.id)
        ORDER BY c.id
        LIMIT %(limit)s
        {lock})
    RETURNING id
"""

_TAKEN_OVER_TOO_OFTEN = "Its worker was lost mid-send {} times (killed or cut off); given up."


def claim(limit: int) -> list[Claim]:
    """Claim up to ``limit`` claimable rows: each becomes processing under a fresh lease, its attempt counted."""
    if limit <= 0:
        return []
    now = timezone.now()
    leases.fail_exhausted(
        OutboundMessage, policy(), _TAKEN_OVER_TOO_OFTEN.format(settings.CHANNEL_MAX_TAKEOVERS + 1), updated_at=now
    )
    adapt = connection.ops.adapt_datetimefield_value
    sql = _CLAIM.format(
        outbox=connection.ops.quote_name(OutboundMessage._meta.db_table),
        assignments=leases.claim_assignments_sql(),
        ready=leases.claimable_sql("c"),
        lock="FOR UPDATE OF c SKIP LOCKED" if connection.vendor == "postgresql" else "",
    )
    params = {
        "now": adapt(now),
        "lease": adapt(policy().lease_until(now)),
        "max_takeovers": settings.CHANNEL_MAX_TAKEOVERS,
        "limit": limit,
    }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            ids = [row[0] for row in cursor.fetchall()]
        return _claims(ids) if ids else []


def _claims(ids: Sequence[int]) -> list[Claim]:
    rows = list(
        OutboundMessage.objects.filter(pk__in=ids)
        .order_by("id")
        .values("id", "attempts", "channel", "address", "text", "part", "person_id", "message_id")
    )
    people = {row["person_id"] for row in rows}
    zones = dict(Profile.objects.filter(user_id__in=people).values_list("user_id", "time_zone"))
    quiet = {q.person_id: q for q in QuietHours.objects.filter(person_id__in=people)}
    public_ids = dict(Message.objects.filter(pk__in={row["message_id"] for row in rows}).values_list("pk", "public_id"))
    heard: dict[tuple[int, str, str], Any] = {
        (user_id, channel, address): at
        for user_id, channel, address, at in LinkedAddress.objects.filter(user_id__in=people).values_list(
            "user_id", "channel", "address", "last_inbound_at"
        )
    }
    claims = []
    for row in rows:
        hours = quiet.get(row["person_id"])
        claims.append(
            Claim(
                row_id=row["id"],
                attempt=row["attempts"],
                channel=row["channel"],
                address=row["address"],
                text=row["text"],
                reference=f"{public_ids[row['message_id']]}-{row['part']}",
                time_zone=zones.get(row["person_id"], "UTC"),
                quiet_starts=hours.starts if hours else None,
                quiet_ends=hours.ends if hours else None,
                last_inbound_at=heard.get((row["person_id"], row["channel"], row["address"])),
            )
        )
    return claims


def _holding(claim: Claim) -> Any:
    return leases.holding(OutboundMessage, claim.row_id, claim.attempt)


def record_sent(claim: Claim, provider_message_id: str, *, as_template: bool = False) -> bool:
    now = timezone.now()
    return bool(
        _holding(claim).update(
            status=OutboundStatus.SENT,
            provider_message_id=provider_message_id,
            as_template=as_template,
            sent_at=now,
            lease_expires_at=None,
            last_error="",
            waiting_for_quiet_hours=False,
            updated_at=now,
        )
    )


def record_retry(claim: Claim, error: str, next_attempt_at: datetime) -> bool:
    return _record_unsent(claim, OutboundStatus.QUEUED, next_attempt_at, last_error=error)


def record_failed(claim: Claim, error: str) -> bool:
    return _record_unsent(claim, OutboundStatus.FAILED, None, last_error=error)


def record_held(claim: Claim, reason: str) -> bool:
    return _record_unsent(claim, OutboundStatus.HELD, None, held_reason=reason, attempts=F("attempts") - 1)


def record_quiet(claim: Claim, until: datetime) -> bool:
    """Quiet hours began since the row was queued: back to queued until they end, the attempt not counted."""
    return _record_unsent(claim, OutboundStatus.QUEUED, until, attempts=F("attempts") - 1, waiting_for_quiet_hours=True)


def put_back(claims: Sequence[Claim]) -> int:
    """Sends that could not finish before the worker stopped: queued again, due at once, the attempt not counted."""
    return sum(_record_unsent(claim, OutboundStatus.QUEUED, None, attempts=F("attempts") - 1) for claim in claims)


def _record_unsent(claim: Claim, status: str, next_attempt_at: datetime | None, **fields: Any) -> bool:
    now = timezone.now()
    return bool(
        _holding(claim).update(
            status=status, next_attempt_at=next_attempt_at, lease_expires_at=None, updated_at=now, **fields
        )
    )


def release_held(user_id: int, channel: str, address: str) -> int:
    """The person wrote from this address (WhatsApp's window is open again): what was held for it goes out now."""
    return OutboundMessage.objects.filter(
        person_id=user_id, channel=channel, address=address, status=OutboundStatus.HELD
    ).update(status=OutboundStatus.QUEUED, held_reason="", next_attempt_at=None, updated_at=timezone.now())
