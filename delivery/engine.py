"""The delivery engine: many attempts in flight in one worker process, with few database connections.

Three kinds of thread, each with its own job:

- the claimer (one database connection; delivery/claiming.py, which the channel worker runs too) claims ready
  deliveries in batches (delivery/queue.py: FOR UPDATE SKIP LOCKED, each thread's messages one at a time and in
  order) whenever attempt slots are free;
- DELIVERY_CONCURRENCY attempt threads hand messages to the assistant. They never touch the database: the claim
  brought the message and its thread, and what a tool-using attempt must read or write (its toolbox, its tool
  calls' ledger, a built-in tool's work) goes to DELIVERY_DATABASE_THREADS database threads (ops/database_work.py).
  Each keeps its keep-alive connection to the runtime (assistant/http.py);
- the claimer also renews the leases of every attempt in flight, with one statement every third of a lease
  (DELIVERY_LEASE_SECONDS), grace period included, so an attempt that takes minutes (a tool-using one) is never taken
  over while this process lives; after kill -9 or a lost machine its deliveries are taken over within a lease of the
  last renewal;
- DELIVERY_RECORDERS recorders (a database connection each) write the outcomes, the replies that finished together
  in one statement and any other outcome in one of its own, and wake the claimer: a finished attempt frees a slot,
  and may make the thread's next message claimable. Waiting on PostgreSQL for one statement per outcome was what
  limited a process (docs/benchmarks.md, "Delivery").

So the process holds at most 1 + DELIVERY_RECORDERS + DELIVERY_DATABASE_THREADS database connections whatever
DELIVERY_CONCURRENCY is (the database threads only once an attempt needed one; plus one for ordinary django.tasks
tasks when it runs inside ``manage.py db_worker``).

Stopping (``stop``, on SIGTERM): claim nothing more; give the attempts in flight until the grace period ends
(DELIVERY_GRACE_SECONDS, below the 30 s platforms wait before SIGKILL); record what finished; put the rest back,
queued and due at once, their attempt not counted. A second SIGTERM (``stop_now``) puts them back at once. After a
SIGKILL nothing runs: the leases expire and any worker takes the deliveries over (queue.py).
"""

import logging
import queue as queues
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from assistant.backends import backend_named
from assistant.outcomes import Outcome, PermanentFailure, Reply, TransientFailure
from delivery import lifecycle, queue
from delivery.claiming import Claimer
from delivery.queue import Claim
from ops import database_work, metrics

logger = logging.getLogger("delivery.handoff")

# How long the claimer waits after a claim found fewer deliveries than it had room for, unless woken earlier.
POLL_SECONDS = 0.1
# After being woken by finished attempts, wait this long so that one claim serves several free slots.
GATHER_SECONDS = 0.005


@dataclass(slots=True)
class Finished:
    claim: Claim
    outcome: Outcome | Exception
    seconds: float


class Engine:
    def __init__(self, concurrency: int | None = None, batch: int | None = None) -> None:
        self.concurrency = concurrency or settings.DELIVERY_CONCURRENCY
        self.batch = batch or settings.DELIVERY_CLAIM_BATCH
        self.recorders = max(settings.DELIVERY_RECORDERS, 1)
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="delivery-attempt")
        self._finished: queues.SimpleQueue[Finished | None] = queues.SimpleQueue()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self.renewals = lifecycle.renewals()
        self.claimer = Claimer(
            name="delivery-claimer",
            capacity=self.concurrency,
            batch=self.batch,
            claim=queue.claim,
            key=lambda claim: (claim.delivery_id, claim.attempt),
            hand_over=self._hand_over,
            renewals=self.renewals,
            logger=logger,
            poll_seconds=POLL_SECONDS,
            gather_seconds=GATHER_SECONDS,
        )

    # --- life cycle -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.claimer.start()
        for n in range(self.recorders):
            thread = threading.Thread(target=self._record_loop, name=f"delivery-recorder-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        logger.info(
            "delivery engine started: up to %s attempts in flight, claims of up to %s", self.concurrency, self.batch
        )

    def begin_stop(self) -> None:
        """Claim nothing more (the attempts in flight go on, their leases renewed)."""
        self.claimer.begin_stop()

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming, wait for the attempts in flight until the grace period ends, put back the rest."""
        grace = settings.DELIVERY_GRACE_SECONDS if grace is None else grace
        self.begin_stop()
        ends_at = time.monotonic() + grace
        while self.in_flight() and time.monotonic() < ends_at:
            time.sleep(0.05)
        self._finish()

    def stop_now(self) -> None:
        """Put back whatever is in flight at once (a second SIGTERM)."""
        self.claimer.begin_stop()
        self._finish()

    def in_flight(self) -> int:
        return self.claimer.in_flight()

    def _finish(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        for _ in range(self.recorders):
            self._finished.put(None)  # each recorder records what has finished, then ends
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        unfinished = self.claimer.stop()  # late outcomes of these are dropped: the deliveries are no longer ours
        if unfinished:
            returned = lifecycle.put_back([claim.held for claim in unfinished])
            logger.warning("delivery engine stopped: %s unfinished attempt(s) put back in the queue", returned)
        else:
            logger.info("delivery engine stopped: nothing in flight")
        self._pool.shutdown(wait=False, cancel_futures=True)
        database_work.shutdown()
        connection.close()

    def drain(self) -> int:
        """Without threads of its own: deliver everything claimable now, batch after batch, until nothing is (a retry
        due later is left for later); returns how many attempts ran. For ``db_worker --batch``."""
        ran = 0
        while claims := queue.claim(self.batch, lease_seconds=lifecycle.unrenewed_lease_seconds()):
            for finished in self._pool.map(self.attempt_now, claims):
                record(finished.claim, finished.outcome, finished.seconds)
            ran += len(claims)
        return ran

    # --- claiming (delivery/claiming.py) -------------------------------------------------------------------------

    def _hand_over(self, claims: Sequence[Claim]) -> None:
        for claim in claims:
            self._pool.submit(self._attempt, claim)

    # --- attempting (no database here) ---------------------------------------------------------------------------

    def _attempt(self, claim: Claim) -> None:
        self._finished.put(self.attempt_now(claim))

    @staticmethod
    def attempt_now(claim: Claim) -> Finished:
        """Hand the claim to its backend, on a thread that holds no database connection (ops/database_work.py)."""
        started = time.monotonic()
        outcome: Outcome | Exception
        try:
            with database_work.attempt_thread():
                outcome = backend_named(claim.backend)(claim.request)
        except Exception as error:
            outcome = error
        return Finished(claim, outcome, time.monotonic() - started)

    # --- recording ------------------------------------------------------------------------------------------------

    def _record_loop(self) -> None:
        while True:
            batch = [self._finished.get()]
            while batch[-1] is not None and len(batch) < self.batch:  # whatever else has finished meanwhile
                try:
                    batch.append(self._finished.get_nowait())
                except queues.Empty:
                    break
            finished = [f for f in batch if f is not None]
            ours = {id(claim) for claim in self.claimer.ours([f.claim for f in finished])}
            self._record_all([f for f in finished if id(f.claim) in ours])
            self.claimer.release([f.claim for f in finished])
            if batch[-1] is None:
                break
        connection.close()

    def _record_all(self, finished: list[Finished]) -> None:
        """Replies together in one statement on PostgreSQL (the common outcome), the rest one statement each."""
        replies = [f for f in finished if isinstance(f.outcome, Reply)]
        if len(replies) > 1 and connection.vendor == "postgresql":
            try:
                recorded = lifecycle.delivered_with_replies(
                    [(f.claim.held, f.outcome.text) for f in replies]  # type: ignore[union-attr]
                )
            except Exception as error:
                logger.warning(
                    "delivery engine: recording %s replies failed (%s); one by one", len(replies), type(error).__name__
                )
                connection.close()
            else:
                for f in replies:
                    if f.claim.delivery_id in recorded:
                        _log_delivered(f.claim, f.seconds)
                    else:
                        _refused(f.claim)
                finished = [f for f in finished if not isinstance(f.outcome, Reply)]
        for f in finished:
            self._record_until_done(f)

    def _record_until_done(self, finished: Finished) -> None:
        failures = 0
        while True:
            try:
                record(finished.claim, finished.outcome, finished.seconds)
                return
            except Exception as error:
                failures += 1
                connection.close()
                if self._stopped.is_set() or failures > 20:
                    # The lease will expire and another attempt will run (same webhook-id).
                    logger.error(
                        "delivery %s: its outcome could not be recorded (%s)",
                        finished.claim.delivery_id,
                        type(error).__name__,
                    )
                    return
                time.sleep(min(0.1 * 2**failures, 5.0))
                close_old_connections()


def record(claim: Claim, outcome: Outcome | Exception, seconds: float) -> str:
    """Record how an attempt ended (one statement) and log it (one line); returns the delivery's status after."""
    if not isinstance(outcome, Exception):  # a reply, or accepted (the reply comes through the callback)
        reply = outcome.text if isinstance(outcome, Reply) else None
        if lifecycle.delivered(claim.held, reply):
            _log_delivered(claim, seconds)
            return "delivered"
        return _refused(claim)
    if isinstance(outcome, PermanentFailure):
        return _failed(claim, str(outcome))
    if isinstance(outcome, TransientFailure):
        failure = outcome
    else:
        logger.error(
            "delivery %s: unexpected error in the %s backend", claim.delivery_id, claim.backend, exc_info=outcome
        )
        failure = TransientFailure(f"Unexpected error: {type(outcome).__name__}.")
    policy = lifecycle.policy()
    if policy.gives_up_after(claim.attempt):
        return _failed(claim, f"{failure} Gave up after {claim.attempt} attempts.")
    delay = policy.backoff_seconds(claim.attempt, failure.retry_after)
    next_attempt_at = timezone.now() + timedelta(seconds=delay)
    if lifecycle.retry_later(claim.held, str(failure), next_attempt_at):
        metrics.delivery_attempt_finished("retrying")
        logger.info(
            "delivery %s: attempt %s failed (%s); retry at %s",
            claim.delivery_id,
            claim.attempt,
            failure,
            next_attempt_at.isoformat(),
        )
        return "queued"
    return _refused(claim)


def _refused(claim: Claim) -> str:
    """The attempt no longer held its delivery (taken over after its lease expired, put back, or answered by a
    callback meanwhile): its outcome is not written."""
    logger.warning(
        "delivery %s: attempt %s no longer holds it (taken over, put back or answered); its outcome is dropped",
        claim.delivery_id,
        claim.attempt,
    )
    return "skipped"


def _log_delivered(claim: Claim, seconds: float) -> None:
    metrics.delivery_attempt_finished("delivered")
    logger.info(
        "delivery %s delivered on attempt %s (%s, %.0f ms)",
        claim.delivery_id,
        claim.attempt,
        claim.backend,
        seconds * 1000,
    )


def _failed(claim: Claim, error: str) -> str:
    if not lifecycle.failed(claim.held, error):
        return _refused(claim)
    metrics.delivery_attempt_finished("failed")
    logger.warning("delivery %s failed after %s attempt(s): %s", claim.delivery_id, claim.attempt, error)
    return "failed"
