"""Leases, renewals, retries with backoff and counted takeovers: the policy of a work queue kept in a table, written
once for any queue (the assistant deliveries, delivery/lifecycle.py, are the first; a second queue, such as an
outbox of channel sends, reuses it as it is).

A row of such a queue has these columns (any model will do; the names are fixed):

    status            'queued' | 'processing' | anything else (finished: the queue no longer looks at it)
    attempts          int, counted by each claim; the claim's token ("attempt n holds the row")
    takeovers         int, how many claims found the row processing under an expired lease (its worker died)
    lease_expires_at  while processing: when any worker may take the row over
    next_attempt_at   while queued: when it is due (NULL: now)

The rules:

- **A claim** sets ``status='processing'``, ``attempts = attempts + 1`` and a lease of ``policy.lease_seconds``. It
  takes a row that is queued and due, or processing under an expired lease while ``takeovers < max_takeovers``
  (``claimable_sql``); taking over counts (``takeover_increment_sql``).
- **Every write of an attempt's outcome is conditional** on the attempt still holding the row: ``holding(model, id,
  attempt)`` (still processing, same attempt number). A worker that comes back after its row was taken over writes
  nothing.
- **Leases are renewed**, not long: the process renews every attempt it has in flight with one statement
  (``renew``), every ``policy.renew_every`` seconds (a third of the lease). A live worker keeps its rows however long
  an attempt takes; a dead one (kill -9, out of memory, a lost machine) loses them at most ``lease_seconds`` after its
  last renewal.
- **Takeovers end**: a row whose lease expired after ``max_takeovers`` takeovers is not claimed again, it is failed
  (``fail_exhausted``): a message that kills every worker that tries it stops blocking what comes after it.
- **Retries back off**: ``policy.backoff_seconds(attempt, retry_after)``, exponential with jitter, capped, a server's
  ``Retry-After`` honoured when longer; after ``policy.max_attempts`` attempts the row fails.

To reuse it for another queue: give the model the five columns above (and ``id``), build a ``LeasePolicy`` from your
own settings, claim with a statement whose WHERE includes ``claimable_sql(alias)`` (add your own ordering rule),
setting the columns as ``claim_assignments_sql()`` does, keep your in-flight rows in a ``Renewals`` (one per process;
``Renewals.tick()`` from a loop that already holds a connection, or ``Renewals.start()`` for a thread of its own; a
worker with many attempts in flight runs delivery/claiming.py's ``Claimer``, which claims and renews for it),
write outcomes through ``holding(...).update(...)`` and call ``fail_exhausted`` before claiming. Nothing here knows
about deliveries."""

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.db.models import F, QuerySet
from django.utils import timezone

logger = logging.getLogger(__name__)

QUEUED, PROCESSING, FAILED = "queued", "processing", "failed"


@dataclass(frozen=True)
class LeasePolicy:
    lease_seconds: float
    max_takeovers: int
    max_attempts: int
    retry_base_seconds: float
    retry_max_seconds: float
    retry_jitter: float = 0.0

    @classmethod
    def from_settings(cls, lease: str, retry: str) -> "LeasePolicy":
        """The policy a queue's settings describe: ``{lease}_LEASE_SECONDS`` and ``{lease}_MAX_TAKEOVERS`` for the
        lease, ``{retry}_MAX_ATTEMPTS`` and ``{retry}_RETRY_BASE_SECONDS``/``_MAX_SECONDS``/``_JITTER`` for the
        retries (docs/reference/settings.md). Read at each call, so a test's override_settings takes effect."""
        return cls(
            lease_seconds=getattr(settings, f"{lease}_LEASE_SECONDS"),
            max_takeovers=getattr(settings, f"{lease}_MAX_TAKEOVERS"),
            max_attempts=getattr(settings, f"{retry}_MAX_ATTEMPTS"),
            retry_base_seconds=getattr(settings, f"{retry}_RETRY_BASE_SECONDS"),
            retry_max_seconds=getattr(settings, f"{retry}_RETRY_MAX_SECONDS"),
            retry_jitter=getattr(settings, f"{retry}_RETRY_JITTER"),
        )

    @property
    def renew_every(self) -> float:
        """A third of a lease: two renewals may be missed (a slow statement, a short outage) before it expires."""
        return self.lease_seconds / 3

    def lease_until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds)

    def backoff_seconds(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after the n-th failed attempt: BASE, 2 BASE, 4 BASE, ... capped at MAX, each shortened at random
        by up to ``retry_jitter`` of itself, so that rows that failed together (a provider's outage) come back spread
        out; a ``Retry-After`` the other side sent is honoured when longer (up to MAX)."""
        delay = min(self.retry_base_seconds * 2 ** max(attempt - 1, 0), self.retry_max_seconds)
        shortened_by = self.retry_jitter * random.random()  # noqa: S311 (spreading retries, not a secret)
        return max(float(delay * (1 - shortened_by)), min(retry_after or 0.0, self.retry_max_seconds))

    def gives_up_after(self, attempt: int) -> bool:
        return attempt >= self.max_attempts


def claimable_sql(alias: str) -> str:
    """The WHERE condition of a claimable row (parameters ``now`` and ``max_takeovers``): queued and due, or
    processing under an expired lease with takeovers left."""
    return (
        f"(({alias}.status = 'queued' AND ({alias}.next_attempt_at IS NULL OR {alias}.next_attempt_at <= %(now)s))"
        f" OR ({alias}.status = 'processing' AND {alias}.lease_expires_at < %(now)s"
        f" AND {alias}.takeovers < %(max_takeovers)s))"
    )


# Thread ids are positive: a claim looks at threads from FIRST_THREAD up to (not including) LAST_THREAD.
FIRST_THREAD, LAST_THREAD = 0, 2**62


# A thread's pending rows ('queued' or 'processing'); the queue's (thread, id) index is partial on this condition.
_PENDING = "status IN ('queued', 'processing')"

# PostgreSQL: a loose index scan whose every step is one probe of the (thread, id) index, bringing the next thread
# with pending rows and its head together (ordered as that index is, the planner can only walk that index).
_HEADS_POSTGRESQL = """
    WITH RECURSIVE heads(thread, id) AS (
        (SELECT t.{thread}, t.id FROM {table} AS t
         WHERE t.{pending} AND t.{thread} >= %(from_thread)s AND t.{thread} < %(until_thread)s
         ORDER BY t.{thread}, t.id LIMIT 1)
        UNION ALL
        SELECT n.thread, n.id FROM heads CROSS JOIN LATERAL (
            SELECT t.{thread} AS thread, t.id FROM {table} AS t
            WHERE t.{pending} AND t.{thread} > heads.thread AND t.{thread} < %(until_thread)s
            ORDER BY t.{thread}, t.id LIMIT 1
        ) AS n
    )
    SELECT c.id FROM heads JOIN {table} AS c ON c.id = heads.id
    WHERE {ready} AND {no_later_in_flight}
    LIMIT %(limit)s
    {lock}
"""
# SQLite (no LATERAL, and a recursive reference may not sit in a subquery): the next thread by min(), its head by
# min() again.
_HEADS_SQLITE = """
    WITH RECURSIVE threads(thread) AS (
        SELECT (SELECT min(t.{thread}) FROM {table} AS t
                WHERE t.{pending} AND t.{thread} >= %(from_thread)s AND t.{thread} < %(until_thread)s)
        UNION ALL
        SELECT (SELECT min(t.{thread}) FROM {table} AS t
                WHERE t.{pending} AND t.{thread} > threads.thread AND t.{thread} < %(until_thread)s)
        FROM threads WHERE threads.thread IS NOT NULL
    )
    SELECT c.id FROM threads
    JOIN {table} AS c ON c.id = (SELECT min(h.id) FROM {table} AS h WHERE h.{pending} AND h.{thread} = threads.thread)
    WHERE {ready} AND {no_later_in_flight}
    LIMIT %(limit)s
"""
# A staff retry may queue an earlier row again while a later one of its thread is in flight: that head waits.
_NO_LATER_IN_FLIGHT = """
    NOT EXISTS (
        SELECT 1 FROM {table} AS e
        WHERE e.{thread} = c.{thread} AND e.status = 'processing' AND e.id > c.id AND e.lease_expires_at >= %(now)s)
"""


def heads_sql(table: str, thread: str, *, lock: str, postgresql: bool) -> str:
    """The per-thread order, written once for every queue: the SELECT of up to ``%(limit)s`` claimable rows, each the
    head of its thread (its first pending row), ready (``claimable_sql``), with no later row of its thread attempted
    under a live lease (a staff retry may queue an earlier row again while a later one is in flight).

    Only heads are ever candidates, so a claim's cost does not grow with how deep a thread is: a loose index scan
    over the pending rows' (thread, id) index walks the threads (an index probe each: the next thread with pending
    rows, then its first row) from ``%(from_thread)s`` up to ``%(until_thread)s``, and stops once ``%(limit)s`` rows
    are found. Its cost is the number of threads it passes: those it claims, and those whose head is in flight or
    waiting for its retry. ``lock``: ``FOR UPDATE OF c SKIP LOCKED`` on PostgreSQL (SQLite has one writer)."""
    names = {"table": table, "thread": thread, "pending": _PENDING}
    rule = {"ready": claimable_sql("c"), "no_later_in_flight": _NO_LATER_IN_FLIGHT.format(**names)}
    if postgresql:
        return _HEADS_POSTGRESQL.format(lock=lock, **rule, **names)
    return _HEADS_SQLITE.format(**rule, **names)


class Windows:
    """Where a process's next claim starts looking, so that when there is more ready work than room no thread
    waits behind the others for long: a claim that found less than it wanted has seen every thread, and the next
    starts from the first again; one that was filled (the queue is busy) makes the next start from a thread drawn at
    random, then wrap around to the first threads if it finds too few."""

    # How long the highest thread with pending rows is remembered (one query at most this often when busy).
    HIGHEST_SECONDS = 5.0

    def __init__(self) -> None:
        self._rotate = False
        self._highest = (FIRST_THREAD, float("-inf"))  # (thread, when asked: time.monotonic())

    def claim(self, run: Callable[[int, int, int], list[Any]], wanted: int, highest: Callable[[], int]) -> list[Any]:
        """``run(from_thread, until_thread, limit)`` claims up to ``limit`` rows in that window of threads;
        ``highest()``: the highest thread with pending rows (asked only when the queue is busy)."""
        start = FIRST_THREAD
        if self._rotate:
            thread, asked = self._highest
            if time.monotonic() - asked > self.HIGHEST_SECONDS:
                thread = max(highest(), FIRST_THREAD)
                self._highest = (thread, time.monotonic())
            start = random.randint(FIRST_THREAD, thread)  # noqa: S311 (fairness, not a secret)
        claimed = run(start, LAST_THREAD, wanted)
        if len(claimed) < wanted and start > FIRST_THREAD:
            claimed += run(FIRST_THREAD, start, wanted - len(claimed))
        self._rotate = len(claimed) >= wanted
        return claimed


def highest_thread(table: str, thread: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT max({thread}) FROM {table} WHERE status IN ('queued', 'processing')"  # noqa: S608 (names)
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else FIRST_THREAD


def claim_assignments_sql() -> str:
    """The SET list of a claim (parameters ``now`` and ``lease``): processing, the attempt counted, a takeover
    counted when the row was taken from a worker whose lease expired."""
    return (
        "takeovers = takeovers + CASE WHEN status = 'processing' THEN 1 ELSE 0 END, "
        "status = 'processing', attempts = attempts + 1, next_attempt_at = NULL, lease_expires_at = %(lease)s"
    )


def holding(model: type[models.Model], row_id: int, attempt: int) -> QuerySet[Any]:
    """The row, while attempt ``attempt`` still holds it: every outcome is written through this."""
    return model._default_manager.filter(pk=row_id, status=PROCESSING, attempts=attempt)


# --- the state changes a failed or unfinished attempt makes, written once for every queue (each only while it holds
# the row); what a success writes is each queue's own (delivery/lifecycle.py ``delivered``, the outbox's ``sent``) ---


def retried(model: type[models.Model], row_id: int, attempt: int, error: str, due: datetime, **extra: Any) -> bool:
    """Retried: a failure with attempts left; queued again, due after its backoff, the error kept."""
    return _release(model, row_id, attempt, QUEUED, due, last_error=error, **extra)


def failed(model: type[models.Model], row_id: int, attempt: int, error: str, **extra: Any) -> bool:
    """Failed: a failure that will not pass, or the last attempt failed."""
    return _release(model, row_id, attempt, FAILED, None, last_error=error, **extra)


def put_back(model: type[models.Model], row_id: int, attempt: int, **extra: Any) -> bool:
    """Put back: the attempt never began, or could not finish before its worker stopped (SIGTERM); queued again, due
    at once, and the attempt not counted."""
    return _release(model, row_id, attempt, QUEUED, None, attempts=F("attempts") - 1, **extra)


def _release(
    model: type[models.Model], row_id: int, attempt: int, status: str, due: datetime | None, **fields: Any
) -> bool:
    fields.setdefault("updated_at", timezone.now())
    return bool(
        holding(model, row_id, attempt).update(status=status, next_attempt_at=due, lease_expires_at=None, **fields)
    )


def fail_exhausted(model: type[models.Model], policy: LeasePolicy, reason: str, **extra: Any) -> list[int]:
    """Fail the rows whose lease expired after ``max_takeovers`` takeovers; returns their ids. ``extra``: more
    columns to set (a finish time, say)."""
    now = timezone.now()
    exhausted = model._default_manager.filter(
        status=PROCESSING, lease_expires_at__lt=now, takeovers__gte=policy.max_takeovers
    )
    ids = list(exhausted.values_list("pk", flat=True)[:1000])
    if not ids:
        return []
    failed = model._default_manager.filter(
        pk__in=ids, status=PROCESSING, lease_expires_at__lt=now, takeovers__gte=policy.max_takeovers
    )
    failed.update(status=FAILED, lease_expires_at=None, last_error=reason, **extra)
    return ids


def renew(model: type[models.Model], held: Iterable[tuple[int, int]], policy: LeasePolicy) -> set[int]:
    """Extend the lease of every (row id, attempt) still held, with one statement; returns the ids renewed. A row
    missing from the answer was lost (taken over after its lease expired, or put back)."""
    pairs = list(held)
    if not pairs:
        return set()
    table = connection.ops.quote_name(model._meta.db_table)
    matches = " OR ".join(["(id = %s AND attempts = %s)"] * len(pairs))
    now = timezone.now()
    adapt = connection.ops.adapt_datetimefield_value
    params: list[Any] = [adapt(policy.lease_until(now)), adapt(now)]
    for row_id, attempt in pairs:
        params += [row_id, attempt]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET lease_expires_at = %s, updated_at = %s "  # noqa: S608 (names, not values)
            f"WHERE status = 'processing' AND ({matches}) RETURNING id",
            params,
        )
        return {int(row[0]) for row in cursor.fetchall()}


class Renewals:
    """The rows one process has in flight, and their renewal every ``policy.renew_every`` seconds.

    ``add``/``discard`` as attempts start and end (any thread); ``tick()`` renews when it is time (call it from a
    loop that holds a database connection anyway, such as a claimer). ``lost`` holds the rows a renewal found taken
    away."""

    def __init__(self, model: type[models.Model], policy: LeasePolicy) -> None:
        self.model = model
        self.policy = policy
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()
        self._next_at = 0.0
        self.lost: set[int] = set()

    def add(self, row_id: int, attempt: int) -> None:
        with self._lock:
            self._held[row_id] = attempt
            self.lost.discard(row_id)

    def discard(self, row_id: int, attempt: int | None = None) -> None:
        with self._lock:
            if attempt is None or self._held.get(row_id) == attempt:
                self._held.pop(row_id, None)

    def held(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._held.items())

    def tick(self, clock: float) -> bool:
        """Renew if ``renew_every`` has passed since the last renewal (``clock``: time.monotonic()); whether it
        renewed. A failure (the database unreachable) is logged and tried again at the next tick."""
        if clock < self._next_at:
            return False
        self._next_at = clock + self.policy.renew_every
        held = self.held()
        if not held:
            return False
        try:
            renewed = renew(self.model, held, self.policy)
        except Exception as error:
            logger.warning("renewing %s lease(s) failed (%s)", len(held), type(error).__name__)
            connection.close()
            self._next_at = clock + min(1.0, self.policy.renew_every)
            return False
        gone = {row_id for row_id, _ in held if row_id not in renewed}
        if gone:
            with self._lock:
                for row_id, attempt in held:
                    if row_id in gone and self._held.get(row_id) == attempt:
                        del self._held[row_id]
                        self.lost.add(row_id)
            logger.warning("%s %s(s) in flight were taken over or put back: %s", len(gone), self.model.__name__, gone)
        return True
