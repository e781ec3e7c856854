"""The channel sender (the ``channels`` kind of ``manage.py worker``, delivery/work.py): many sends in flight in one
process, two database connections.

- One claimer (a database connection) claims ready outbox rows in batches, a little ahead of the free send threads
  (so that a thread that finishes a send starts the next at once, never waiting for a claim), decides each without
  the database (channels/outbound/decide.py: send, send the approved template, wait for quiet hours, hold) and
  renews the leases of the sends in flight (delivery/leases.py ``Renewals``).
- CHANNEL_CONCURRENCY send threads call the providers through the adapters, one HTTP request per row. They never
  touch the database.
- One recorder (a database connection) writes each outcome while its attempt still holds the row.

Stopping (SIGTERM): claim nothing more and start no send claimed ahead (those are put back at once); the sends in
flight get CHANNEL_GRACE_SECONDS (a send ends within CHANNEL_TIMEOUT_SECONDS, less than the grace, so in practice
all of them finish and are recorded); any that could not are put back, queued, uncounted. After SIGKILL nothing
runs: the leases expire and another worker (or this one, restarted) takes the rows over.
"""

import logging
import queue as queues
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from channels.adapters import configured
from channels.adapters.base import Adapter, SendError, Sent
from channels.adapters.unknown import resend_not_before, send_once
from channels.models import OutboundMessage
from channels.outbound import queue
from channels.outbound.decide import Decision, Hold, Send, Wait, decide
from channels.outbound.queue import Claim
from delivery import leases
from delivery.claiming import Claimer

logger = logging.getLogger("channels.outbound")

# How long the claimer waits when nothing was claimable, unless woken by finished sends; after being woken, how
# long it lets more finish so that one claim serves several free slots.
POLL_SECONDS = 0.1
GATHER_SECONDS = 0.01
# How far the claimer claims ahead of the free send threads, as a share of CHANNEL_CONCURRENCY: a thread that
# finishes a send takes the next one at once instead of waiting for the next claim. Claiming only for the free
# threads made the sends move in waves (all claimed together, sent together, recorded together), each wave
# waiting for its claim: 64 threads and a provider answering in 200 ms made 264 sends/s of the 320/s they allow;
# claiming ahead, 310/s (docs/benchmarks.md, "Channels"). What is claimed ahead is held under a renewed lease like
# what is being sent, and put back, uncounted, when the worker stops before sending it.
AHEAD_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class NotStarted:
    """A send claimed ahead that had not begun when the worker was told to stop: put back, uncounted."""


@dataclass(slots=True)
class Outcome:
    claim: Claim
    result: Sent | Exception | Decision | NotStarted
    as_template: bool = False
    seconds: float = 0.0


def template_channels(adapters: dict[str, Adapter]) -> set[str]:
    """The channels that can send the operator's approved template outside WhatsApp's window (WhatsApp, through
    Twilio with TWILIO_WHATSAPP_TEMPLATE_SID or through Meta's Cloud API with WHATSAPP_CLOUD_TEMPLATE_NAME)."""
    return {name for name, adapter in adapters.items() if adapter.can_send_template()}


def send_now(adapter: Adapter, claim: Claim, as_template: bool) -> Outcome:
    started = time.monotonic()
    result: Sent | Exception
    try:
        # An earlier attempt that timed out may have arrived: asked before sending again (channels/adapters/unknown.py).
        result = send_once(adapter, claim.address, claim.text, reference=claim.reference, as_template=as_template)
    except Exception as error:
        result = error
    return Outcome(claim, result, as_template, time.monotonic() - started)


def record(outcome: Outcome) -> str:
    """Write how a send ended (one statement); returns the row's status after, or "skipped" when the attempt no
    longer held it."""
    claim, result = outcome.claim, outcome.result
    if isinstance(result, Sent):
        if not queue.record_sent(claim, result.provider_message_id, as_template=outcome.as_template):
            return "skipped"
        _log_sent(outcome)
        return "sent"
    if isinstance(result, Wait):
        return "queued" if queue.record_quiet(claim, result.until) else "skipped"
    if isinstance(result, Hold):
        return "held" if queue.record_held(claim, result.reason) else "skipped"
    if isinstance(result, NotStarted):
        return "queued" if queue.put_back([claim]) else "skipped"
    if isinstance(result, SendError):
        reason, retryable = result.reason, result.retryable
    elif isinstance(result, Exception):
        logger.error("outbox %s: unexpected error sending on %s", claim.row_id, claim.channel, exc_info=result)
        reason, retryable = f"Unexpected error: {type(result).__name__}.", True
    else:
        raise TypeError(f"a send decided but not sent: {result!r}")
    rules = queue.policy()
    if not retryable or rules.gives_up_after(claim.attempt):
        reason = reason if not retryable else f"{reason} Gave up after {claim.attempt} attempts."
        if not queue.record_failed(claim, reason):
            return "skipped"
        logger.warning("outbox %s failed after %s attempt(s): %s", claim.row_id, claim.attempt, reason)
        return "failed"
    now = timezone.now()
    due = now + timedelta(seconds=rules.backoff_seconds(claim.attempt))
    # A send whose outcome is unknown waits until the provider can say whether it took it.
    due = max(due, resend_not_before(result, now) or due)
    if not queue.record_retry(claim, reason, due):
        return "skipped"
    logger.info("outbox %s: attempt %s failed (%s); retry at %s", claim.row_id, claim.attempt, reason, due.isoformat())
    return "queued"


def _log_sent(outcome: Outcome) -> None:
    claim = outcome.claim
    logger.info(
        "outbox %s sent on %s (attempt %s, %.0f ms)", claim.row_id, claim.channel, claim.attempt, outcome.seconds * 1000
    )


class Sender:
    def __init__(self, concurrency: int | None = None, batch: int | None = None) -> None:
        self.concurrency = concurrency or settings.CHANNEL_CONCURRENCY
        self.batch = batch or settings.CHANNEL_CLAIM_BATCH
        self.ahead = max(int(self.concurrency * AHEAD_SHARE), 1)
        self.adapters = configured()
        self.templates = template_channels(self.adapters)
        self.claimer = Claimer(
            name="channel-claimer",
            capacity=self.concurrency + self.ahead,
            batch=self.batch,
            claim=queue.claim,
            key=lambda claim: (claim.row_id, claim.attempt),
            hand_over=self._hand_over,
            renewals=leases.Renewals(OutboundMessage, queue.policy()),
            logger=logger,
            poll_seconds=POLL_SECONDS,
            gather_seconds=GATHER_SECONDS,
        )
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="channel-send")
        self._outcomes: queues.SimpleQueue[Outcome | None] = queues.SimpleQueue()
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._stop_begun = threading.Event()
        self._recorder = threading.Thread(target=self._record_loop, name="channel-recorder", daemon=True)

    def start(self) -> None:
        self.claimer.start()
        self._recorder.start()
        logger.info("channel worker started: %s, up to %s sends in flight", sorted(self.adapters), self.concurrency)

    def in_flight(self) -> int:
        return self.claimer.in_flight()

    def begin_stop(self) -> None:
        """Claim nothing more and start no send claimed ahead; the leases of what is in flight are still renewed."""
        self._stopping.set()
        self.claimer.begin_stop()

    def stop(self, grace: float | None = None) -> None:
        grace = settings.CHANNEL_GRACE_SECONDS if grace is None else grace
        self._stop_begun.set()
        self.begin_stop()
        ends_at = time.monotonic() + grace
        while self.in_flight() and time.monotonic() < ends_at and not self._hurry.is_set():
            time.sleep(0.05)
        self._outcomes.put(None)
        self._recorder.join(timeout=5)
        unfinished = self.claimer.stop()
        if unfinished:
            logger.warning("channel worker stopped: %s unfinished send(s) put back", queue.put_back(unfinished))
        self._pool.shutdown(wait=False, cancel_futures=True)
        connection.close()

    def hurry(self) -> None:
        """End the grace period now (a second SIGTERM): what is still in flight is put back."""
        self._hurry.set()

    def stop_now(self) -> None:
        """Put back what is in flight at once: ends a stop under way, or stops with no grace period."""
        self.hurry()
        if not self._stop_begun.is_set():
            self.stop()

    def drain(self) -> int:
        """Without threads of its own: send everything claimable now, batch after batch; how many rows ran."""
        ran = 0
        while claims := queue.claim(self.batch):
            now = timezone.now()
            for claim in claims:
                record(self._outcome_of(claim, now))
            ran += len(claims)
        return ran

    def _outcome_of(self, claim: Claim, now: datetime) -> Outcome:
        decision = decide(claim, now, set(self.adapters), self.templates)
        if isinstance(decision, Send):
            return send_now(self.adapters[claim.channel], claim, decision.as_template)
        return Outcome(claim, decision)

    def _hand_over(self, claims: Sequence[Claim]) -> None:
        """Decide each claimed row without the database; a send goes to a send thread, anything else straight to the
        recorder."""
        now = timezone.now()
        for claim in claims:
            decision = decide(claim, now, set(self.adapters), self.templates)
            if isinstance(decision, Send):
                self._pool.submit(self._send, claim, decision.as_template)
            else:
                self._outcomes.put(Outcome(claim, decision))

    def _send(self, claim: Claim, as_template: bool) -> None:
        if self._stopping.is_set():  # claimed ahead, not begun: SIGTERM starts no new send
            self._outcomes.put(Outcome(claim, NotStarted()))
            return
        self._outcomes.put(send_now(self.adapters[claim.channel], claim, as_template))

    def _record_loop(self) -> None:
        while True:
            batch = [self._outcomes.get()]
            while batch[-1] is not None and len(batch) < self.batch:  # whatever else finished meanwhile
                try:
                    batch.append(self._outcomes.get_nowait())
                except queues.Empty:
                    break
            outcomes = [outcome for outcome in batch if outcome is not None]
            ours = {id(claim) for claim in self.claimer.ours([o.claim for o in outcomes])}
            self._record_all([o for o in outcomes if id(o.claim) in ours])
            self.claimer.release([o.claim for o in outcomes])
            if batch[-1] is None:
                break
        connection.close()

    def _record_all(self, outcomes: list[Outcome]) -> None:
        """The sends the provider took in one statement (the common outcome; on PostgreSQL, even a single one: the
        statement is written once, where the ORM would build its UPDATE anew), the rest one by one."""
        sent = [o for o in outcomes if isinstance(o.result, Sent)]
        if sent and connection.vendor == "postgresql":
            try:
                written = queue.record_all_sent(
                    [(o.claim, o.result.provider_message_id, o.as_template) for o in sent]  # type: ignore[union-attr]
                )
            except Exception as error:
                logger.warning("outbox: recording %s sends failed (%s); one by one", len(sent), type(error).__name__)
                connection.close()
            else:
                for outcome in sent:
                    if outcome.claim.row_id in written:
                        _log_sent(outcome)
                outcomes = [o for o in outcomes if not isinstance(o.result, Sent)]
        for outcome in outcomes:
            self._record_until_done(outcome)

    def _record_until_done(self, outcome: Outcome) -> None:
        for failures in range(1, 21):
            try:
                record(outcome)
                return
            except Exception as error:
                logger.warning("outbox %s: recording failed (%s)", outcome.claim.row_id, type(error).__name__)
                connection.close()
                time.sleep(min(0.1 * 2**failures, 5.0))
                close_old_connections()
        # Its lease expires and another attempt sends it again: one of the documented duplicates
        # (docs/explanation/outbox.md#when-a-text-may-arrive-twice).
        logger.error("outbox %s: its outcome could not be recorded", outcome.claim.row_id)
