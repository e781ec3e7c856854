"""A webhook trigger's delivery log (docs/howto/webhooks.md): the last LOG_LENGTH requests to its URL, each
accepted (with the message it recorded), a duplicate, GitHub's ping, or refused with the error code it was answered.

What it costs, and what a flood of bad requests cannot do to it:

- An accepted firing's line is one more row of the statement that records its message, and the trim that keeps
  LOG_LENGTH lines one more WITH query of it (ingestion/hotpath/inserts.py ``also``): no added round trip. The trim
  skips rows another transaction is deleting (SKIP LOCKED), so two firings never wait on each other over it; a line
  too many is trimmed by the next write.
- Everything else is written after the answer is decided, outside the request's transaction, and coalesced: a
  refusal (or duplicate, or ping) of the same kind as one in the last COALESCE_SECONDS adds to that line's count in
  the cache, and the database line takes the count and time at most every FLUSH_SECONDS. A flood of bad tokens
  against a known trigger URL costs one cache round trip a request (a Lua call on Redis) and a database write every
  few seconds, and is one line of the log however long it lasts. Once the address is blocked for failing
  authentication, a request whose URL alone names the trigger is not logged (ingestion/triggers.py): a flood of
  random trigger ids would otherwise cost a lookup and a cache entry each, which the block exists to spare.
- Lines that are not accepted firings take at most REFUSALS_KEPT of the LOG_LENGTH places, so refusals cannot push
  the trigger's real firings out of the log; the page says how many lines a coalesced one stands for.
- Writing the log never changes an answer: if the database or the cache fails here, the line is lost and a warning
  logged.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from assistant.models import Action, ActionState
from ingestion.hotpath.inserts import Condition
from ingestion.models import FiringOutcome, TriggerFiring
from ops.outage import is_outage
from triggers.models import WebhookTrigger
from triggers.summaries import summarise

logger = logging.getLogger(__name__)

LOG_LENGTH = 100
REFUSALS_KEPT = 50  # of LOG_LENGTH: the rest stays for accepted firings whatever floods the trigger
COALESCE_SECONDS = 60  # a line takes the next request of its kind until this long after the last one it counted
FLUSH_SECONDS = 5  # a coalescing line's count and time reach the database at most this often
_COUNT_TTL = 24 * 60 * 60  # the live count outlives the line's coalescing: the page reads it (``live_counts``)
_OPENING = "opening"  # the line is being written by another request
_UNKNOWN = "unknown"  # no trigger has this id: nothing to log (and no query) until the entry expires
_SUMMARY_CHARS = 200


def summary_of(payload: Any, github_event: str | None = None) -> str:
    """A line about a payload that holds no value from it unless a summary we wrote for its sender picks it (a
    GitHub event's repository and title, an alert's name): otherwise only its member names."""
    line = summarise(payload, github_event)
    if not line and isinstance(payload, dict) and payload:
        line = "JSON object: " + ", ".join(" ".join(str(name).split())[:40] for name in list(payload)[:12])
        if len(payload) > 12:
            line += f" and {len(payload) - 12} more"
    return line if len(line) <= _SUMMARY_CHARS else line[: _SUMMARY_CHARS - 1] + "…"


def accepted_line(trigger: WebhookTrigger, summary: str) -> TriggerFiring:
    """The (unsaved) line of an accepted firing: written with its message (ingestion/hotpath/recording.py)."""
    return TriggerFiring(trigger_id=trigger.pk, outcome=FiringOutcome.ACCEPTED, summary=summary)


def trim_with_insert(trigger_pk: int) -> Condition:
    """The DELETE that keeps the trigger's log at LOG_LENGTH lines, run with the insert of one more: it sees the
    lines as they were before it, so it keeps LOG_LENGTH - 1 of them."""
    table = connections[DEFAULT_DB_ALIAS].ops.quote_name(TriggerFiring._meta.db_table)
    oldest_kept = f"SELECT id FROM {table} WHERE trigger_id = %s ORDER BY id DESC LIMIT 1 OFFSET {LOG_LENGTH - 2}"  # noqa: S608
    if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":
        # Lines another firing is trimming right now are left to it: this one never waits for that transaction.
        doomed = f"SELECT id FROM {table} WHERE trigger_id = %s AND id < ({oldest_kept}) FOR UPDATE SKIP LOCKED"  # noqa: S608
        return Condition(f"DELETE FROM {table} WHERE id IN ({doomed})", [trigger_pk, trigger_pk])  # noqa: S608
    return Condition(f"DELETE FROM {table} WHERE trigger_id = %s AND id < ({oldest_kept})", [trigger_pk, trigger_pk])  # noqa: S608


def note(
    outcome: FiringOutcome,
    *,
    trigger: WebhookTrigger | None = None,
    public_id: str | None = None,
    code: str = "",
    summary: str = "",
) -> None:
    """Log a request that recorded no message: for ``trigger``, or for the trigger whose public id is in the URL
    (which may not exist). Coalesced with the last line of the same kind (see above); never raises."""
    public_id = trigger.public_id if trigger is not None else public_id
    if not public_id:
        return
    kind = f"trglog:open:{public_id}:{outcome}:{code}"
    try:
        counted = _count_on_open_line(kind)
        if counted is None and cache.add(kind, _OPENING, COALESCE_SECONDS):
            _open_line(kind, outcome, trigger, public_id, code, summary)
        elif counted is None and isinstance(current := cache.get(kind), int):
            _flush_if_due(kind, current, *_count_locally(current))  # opened by another request a moment ago
        elif counted is not None and counted[0] > 0:
            _flush_if_due(kind, *counted)
        # else: another request is writing the line (a few milliseconds), or no trigger has this id
    except Exception as error:
        if not (isinstance(error, DatabaseError) or is_outage(error)):
            raise
        logger.warning("trigger log: a line for %s was not written (%s)", public_id, type(error).__name__)


def _count_on_open_line(kind: str) -> tuple[int, int, bool] | None:
    """The open line of this kind, one more on its count, and whether this request writes the count to the
    database: one round trip on Redis (ingestion/hotpath/cache.py); None when no line of the kind is open."""
    count_on_line = getattr(cache, "count_on_line", None)
    if count_on_line is not None:
        found: tuple[int, int, bool] | None = count_on_line(
            kind, "trglog:count:", "trglog:flush:", _COUNT_TTL, FLUSH_SECONDS
        )
        return found
    current = cache.get(kind)  # the local-memory cache: one process, three calls
    if current is None:
        return None
    if not isinstance(current, int):
        return -1, 0, False
    return (current, *_count_locally(current))


def _count_locally(line_pk: int) -> tuple[int, bool]:
    try:
        count = cache.incr(_count_key(line_pk))
    except ValueError:  # the live count was evicted: the database's count goes on from what it has
        count = 0
    return count, cache.add(f"trglog:flush:{line_pk}", 1, FLUSH_SECONDS)


def _open_line(
    kind: str, outcome: str, trigger: WebhookTrigger | None, public_id: str, code: str, summary: str
) -> None:
    trigger_pk = trigger.pk if trigger is not None else _trigger_pk(public_id)
    if trigger_pk is None:
        cache.set(kind, _UNKNOWN, COALESCE_SECONDS)
        return
    try:
        line = TriggerFiring.objects.create(trigger_id=trigger_pk, outcome=outcome, code=code, summary=summary[:200])
    except BaseException:
        cache.delete(kind)
        raise
    cache.set(_count_key(line.pk), 1, _COUNT_TTL)
    cache.set(kind, line.pk, COALESCE_SECONDS)
    _trim_refusals(trigger_pk)


def _trigger_pk(public_id: str) -> int | None:
    return WebhookTrigger.objects.filter(public_id=public_id).values_list("pk", flat=True).first()


def _flush_if_due(kind: str, line_pk: int, count: int, due: bool) -> None:
    """Write the line's count and time to the database, when this request is the first in FLUSH_SECONDS."""
    if not due:
        return
    updated = TriggerFiring.objects.filter(pk=line_pk).update(
        count=Greatest(F("count") + (0 if count else 1), count), last_at=timezone.now()
    )
    if updated:
        cache.touch(kind, COALESCE_SECONDS)  # the line keeps taking requests while they keep coming
    else:
        cache.delete(kind)  # trimmed away: the next request opens a new line


def _count_key(line_pk: int) -> str:
    return f"trglog:count:{line_pk}"


def _trim_refusals(trigger_pk: int) -> None:
    """Keep REFUSALS_KEPT lines that are not accepted firings, and LOG_LENGTH lines in all. Run when a line that is
    not an accepted firing opens: at most once per kind per COALESCE_SECONDS."""
    lines = TriggerFiring.objects.filter(trigger_id=trigger_pk).order_by("-id")
    for kept, among in ((REFUSALS_KEPT, lines.exclude(outcome=FiringOutcome.ACCEPTED)), (LOG_LENGTH, lines)):
        oldest_kept = among.values_list("pk", flat=True)[kept - 1 : kept].first()
        if oldest_kept is None:
            continue
        with transaction.atomic():
            doomed = among.filter(pk__lt=oldest_kept).select_for_update(skip_locked=True)
            TriggerFiring.objects.filter(pk__in=list(doomed.values_list("pk", flat=True))).delete()


def live_counts(lines: Iterable[TriggerFiring]) -> dict[int, int]:
    """The counts of coalesced lines as the cache has them (ahead of the database by up to FLUSH_SECONDS)."""
    pks = [line.pk for line in lines if line.outcome != FiringOutcome.ACCEPTED]
    if not pks:
        return {}
    try:
        found = cache.get_many([_count_key(pk) for pk in pks])
    except Exception as error:
        if not is_outage(error):
            raise
        return {}
    return {pk: found[_count_key(pk)] for pk in pks if isinstance(found.get(_count_key(pk)), int)}


@dataclass(frozen=True, slots=True)
class Line:
    line: TriggerFiring
    count: int  # with the requests counted since the database last took the count
    awaiting_approval: bool  # the assistant waits for the person's approval of something its message asked


def recent(trigger: WebhookTrigger) -> list[Line]:
    """The trigger's log, newest first, as its owner reads it (the console's page, the API): three queries (the
    lines with their messages and deliveries, the actions awaiting approval among them) and one cache round trip
    (the live counts)."""
    lines = list(
        TriggerFiring.objects.filter(trigger=trigger).select_related("message__delivery").order_by("-id")[:LOG_LENGTH]
    )
    counts = live_counts(lines)
    message_ids = [line.message_id for line in lines if line.message_id]
    awaiting = set(
        Action.objects.filter(delivery__message_id__in=message_ids, state=ActionState.AWAITING_APPROVAL).values_list(
            "delivery__message_id", flat=True
        )
    ) if message_ids else set()  # fmt: skip
    return [Line(line, max(line.count, counts.get(line.pk, 0)), line.message_id in awaiting) for line in lines]


# Only bench/trigger_log.py switches it off, to measure what the log costs an accepted firing.
ENABLED = True


def enabled() -> bool:
    return ENABLED
