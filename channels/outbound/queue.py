"""The outbox as a queue: rows claimed in batches by the channel workers (channels/outbound/sender.py), with the
delivery engine's guarantees, from the same policy module (delivery/leases.py): a claim holds a row under a
lease the worker renews; a row whose worker died is taken over once its lease expires, and failed after
CHANNEL_MAX_TAKEOVERS takeovers; failures retry with backoff; every outcome is written only while the attempt still
holds the row, so a worker that comes back late writes nothing.

One rule of its own: a row is claimable only when it is first among its person's pending rows, so a person's texts
leave in the order they were written (the parts of a long message in order too), one at a time, and different
people's in parallel. A row waiting for its backoff or for quiet hours to end keeps its place.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Model
from django.utils import timezone

from accounts.models import Profile
from channels.models import LinkedAddress, OutboundMessage, OutboundStatus, QuietHours
from conversations.models import Message
from delivery import leases
from ingestion.hotpath.inserts import Update


def policy() -> leases.LeasePolicy:
    return leases.LeasePolicy.from_settings(lease="CHANNEL", retry="CHANNEL")


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


# PostgreSQL: the choice made once (MATERIALIZED). Written as ``WHERE id IN (…)``, the planner may run the locking
# subquery again for each row it compares, which took seconds on a freshly filled, not yet analyzed outbox. The
# claimed rows come back with what their sends need (_DETAILS) in the same statement: one round trip a claim, and no
# query for the ORM to build each time (building the join of five tables was a sixth of the worker's CPU).
_CLAIM_POSTGRESQL = """
    WITH claimable AS MATERIALIZED ({claimable}),
    claimed AS (
        UPDATE {outbox} AS o SET {assignments}, updated_at = %(now)s
        FROM claimable WHERE o.id = claimable.id
        RETURNING o.id, o.attempts, o.channel, o.address, o.text, o.part, o.message_id, o.person_id
    )
    {details}
"""

_CLAIM_SQLITE = """
    UPDATE {outbox} SET {assignments}, updated_at = %(now)s
    WHERE id IN ({claimable})
    RETURNING id
"""

# What a send needs besides its row: its message's public id (the reference), the person's time zone and quiet
# hours, and when the address last wrote (WhatsApp's window). An address is linked to one person at most (a unique
# constraint), so each join brings one row or none.
_DETAILS = """
    SELECT c.id, c.attempts, c.channel, c.address, c.text, c.part, m.public_id, p.time_zone, q.starts, q.ends,
           a.last_inbound_at
    FROM {rows} AS c
    JOIN {messages} AS m ON m.id = c.message_id
    LEFT JOIN {profiles} AS p ON p.user_id = c.person_id
    LEFT JOIN {quiet_hours} AS q ON q.person_id = c.person_id
    LEFT JOIN {linked} AS a ON a.user_id = c.person_id AND a.channel = c.channel AND a.address = c.address
    {where}
    ORDER BY c.id
"""

_last_reaped = 0.0
_windows = leases.Windows()
_TAKEN_OVER_TOO_OFTEN = "Its worker was lost mid-send {} times (killed or cut off); given up."


def claim(limit: int, *, lease_seconds: float | None = None) -> list[Claim]:
    """Claim up to ``limit`` claimable rows: each becomes processing under a fresh lease (``lease_seconds``, by default
    CHANNEL_LEASE_SECONDS), its attempt counted."""
    if limit <= 0:
        return []
    global _last_reaped
    now = timezone.now()
    if now.timestamp() - _last_reaped >= 1.0:  # once a second is soon enough, and saves a query per claim
        _last_reaped = now.timestamp()
        leases.fail_exhausted(
            OutboundMessage, policy(), _TAKEN_OVER_TOO_OFTEN.format(settings.CHANNEL_MAX_TAKEOVERS + 1), updated_at=now
        )
    adapt = connection.ops.adapt_datetimefield_value
    lease = adapt(now + timedelta(seconds=lease_seconds or policy().lease_seconds))
    params = {"now": adapt(now), "lease": lease, "max_takeovers": settings.CHANNEL_MAX_TAKEOVERS}

    def run(from_thread: int, until_thread: int, wanted: int) -> list[Claim]:
        window = {**params, "limit": wanted, "from_thread": from_thread, "until_thread": until_thread}
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_claim_postgresql(), window)
                return [_claim_of(row) for row in cursor.fetchall()]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_claim_sqlite(), window)
            ids = [int(row[0]) for row in cursor.fetchall()]
            if not ids:
                return []
            cursor.execute(_details("c.id IN ({})".format(", ".join(["%s"] * len(ids)))), ids)
            return [_claim_of(row) for row in cursor.fetchall()]

    claimed = _windows.claim(run, limit, lambda: leases.highest_thread(_table(OutboundMessage), "person_id"))
    return sorted(claimed, key=lambda claim: claim.row_id)


@cache
def _claim_postgresql() -> str:
    return _CLAIM_POSTGRESQL.format(
        claimable=_claimable("FOR UPDATE OF c SKIP LOCKED"),
        outbox=_table(OutboundMessage),
        assignments=leases.claim_assignments_sql(),  # the SET list names the updated table's columns, unqualified
        details=_details("", rows="claimed"),
    )


@cache
def _claim_sqlite() -> str:
    return _CLAIM_SQLITE.format(
        claimable=_claimable(""), outbox=_table(OutboundMessage), assignments=leases.claim_assignments_sql()
    )


def _claimable(lock: str) -> str:
    """delivery/leases.py's per-thread rule, a person's pending texts being their thread."""
    postgresql = connection.vendor == "postgresql"
    return leases.heads_sql(_table(OutboundMessage), "person_id", lock=lock, postgresql=postgresql)


def _details(where: str, rows: str = "") -> str:
    return _DETAILS.format(
        rows=rows or _table(OutboundMessage),
        messages=_table(Message),
        profiles=_table(Profile),
        quiet_hours=_table(QuietHours),
        linked=_table(LinkedAddress),
        where=f"WHERE {where}" if where else "",
    )


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _claim_of(row: Sequence[Any]) -> Claim:
    row_id, attempt, channel, address, text, part, public_id, time_zone, starts, ends, last_inbound_at = row
    return Claim(
        row_id=row_id,
        attempt=attempt,
        channel=channel,
        address=address,
        text=text,
        reference=f"{public_id}-{part}",
        time_zone=time_zone or "UTC",
        quiet_starts=_time(starts),
        quiet_ends=_time(ends),
        last_inbound_at=_moment(last_inbound_at),
    )


def _time(value: Any) -> time | None:
    """A TIME column as it comes from a raw query: a time on PostgreSQL, text on SQLite."""
    return time.fromisoformat(value) if isinstance(value, str) else value


def _moment(value: Any) -> datetime | None:
    """A timestamp column as it comes from a raw query: aware on PostgreSQL, text in UTC on SQLite."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def _holding(claim: Claim) -> Any:
    return leases.holding(OutboundMessage, claim.row_id, claim.attempt)


# The one writer of "sent", for any number of sends the provider took: one statement both databases accept.
_SENT = """
    WITH v(row_id, attempt, provider_id, template) AS (VALUES {rows})
    UPDATE {outbox} SET status = 'sent', provider_message_id = v.provider_id, as_template = v.template,
        sent_at = %s, next_attempt_at = NULL, lease_expires_at = NULL, last_error = '',
        waiting_for_quiet_hours = false, updated_at = %s
    FROM v WHERE id = v.row_id AND status = 'processing' AND attempts = v.attempt
    RETURNING id
"""


def sent(taken: Sequence[tuple[Claim, str, bool]]) -> set[int]:
    """Sent: the provider took each of these (claim, provider message id, sent as a template), for the attempts
    that still hold their row; returns the rows written."""
    if not taken:
        return set()
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params: list[Any] = []
    for claim, provider_id, as_template in taken:
        params += [claim.row_id, claim.attempt, provider_id, as_template]
    rows = ", ".join(["(%s, %s, %s, %s)"] * len(taken))
    with connection.cursor() as cursor:
        cursor.execute(_SENT.format(rows=rows, outbox=_table(OutboundMessage)), [*params, now, now])
        return {int(row[0]) for row in cursor.fetchall()}


def record_retry(claim: Claim, error: str, next_attempt_at: datetime) -> bool:
    """Retried (delivery/leases.py)."""
    return leases.retried(OutboundMessage, claim.row_id, claim.attempt, error, next_attempt_at)


def record_failed(claim: Claim, error: str) -> bool:
    """Failed (delivery/leases.py)."""
    return leases.failed(OutboundMessage, claim.row_id, claim.attempt, error)


def record_held(claim: Claim, reason: str) -> bool:
    return _record_unsent(claim, OutboundStatus.HELD, None, held_reason=reason, attempts=F("attempts") - 1)


def record_quiet(claim: Claim, until: datetime) -> bool:
    """Quiet hours began since the row was queued: back to queued until they end, the attempt not counted."""
    return _record_unsent(claim, OutboundStatus.QUEUED, until, attempts=F("attempts") - 1, waiting_for_quiet_hours=True)


def put_back(claims: Sequence[Claim]) -> int:
    """Put back (delivery/leases.py): sends never begun, or not finished when the worker stopped; uncounted."""
    return sum(leases.put_back(OutboundMessage, claim.row_id, claim.attempt) for claim in claims)


def _record_unsent(claim: Claim, status: str, next_attempt_at: datetime | None, **fields: Any) -> bool:
    now = timezone.now()
    return bool(
        _holding(claim).update(
            status=status, next_attempt_at=next_attempt_at, lease_expires_at=None, updated_at=now, **fields
        )
    )


def release_held(user_id: int, channel: str, address: str) -> int:
    """The person wrote from this address (WhatsApp's window is open again): what was held for it goes out now."""
    release = held_released(user_id, channel, address, timezone.now())
    return OutboundMessage.objects.filter(**dict(release.where)).update(**dict(release.values))


def held_released(user_id: int, channel: str, address: str, now: datetime) -> Update:
    """``release_held`` as a change to make with the person's message, in its statement (channels/inbound.py)."""
    return Update(
        OutboundMessage,
        (("person", user_id), ("channel", channel), ("address", address), ("status", OutboundStatus.HELD)),
        (("status", OutboundStatus.QUEUED), ("held_reason", ""), ("next_attempt_at", None), ("updated_at", now)),
    )
