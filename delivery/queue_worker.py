"""One mechanism for every queue kept in a table with many attempts in flight: the delivery engine (deliveries to
the assistant, delivery/engine.py) and the channel sender (the outbox, channels/outbound/sender.py) are each this
worker with a ``Kind`` that says only what differs: how a claim is made, what an attempt does, what an outcome
writes.

Three kinds of thread:

- the claimer (one database connection, delivery/claiming.py) claims ready rows in batches whenever there is room
  (``concurrency`` attempts, plus ``ahead`` claimed in advance so that a free attempt thread never waits for a
  claim) and renews the leases of everything held, every third of a lease, grace period included;
- ``concurrency`` attempt threads run ``Kind.attempt``; they never touch the database (what an attempt must read
  or write goes to ops/database_work.py's threads);
- ``recorders`` recorder threads (a database connection each) write the outcomes: first ``Kind.record_together``
  (the common outcome of many attempts in one statement), then each of the rest through ``settle``, the one
  decision of what an outcome makes of its row (done, retried, failed, put back).

Stopping (``stop``, on SIGTERM): claim nothing more and start nothing claimed ahead (put back at once, uncounted);
give what is in flight the grace period; record what finished; put back what did not, uncounted. ``stop_now`` (a
second SIGTERM) puts back at once. ``drain`` attempts what is claimable now without threads of its own: ``--batch``,
and the deliveries of a task backend outside the database (delivery/tasks.py), so a row has one way to run.
After a SIGKILL nothing runs: the leases expire and any worker takes the rows over (delivery/leases.py).
"""

import logging
import queue as queues
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from django.db import close_old_connections, connection
from django.utils import timezone

from delivery import leases
from delivery.claiming import Claimer
from ops import database_work


@dataclass(frozen=True, slots=True)
class NotStarted:
    """Claimed ahead, not begun when the worker was told to stop: put back, uncounted."""


@dataclass(frozen=True, slots=True)
class Failure:
    """How a failed attempt is read: why, whether trying again may help, and how long the other side asked us to
    wait (Retry-After), if it said."""

    reason: str
    retryable: bool = True
    retry_after: float | None = None


@dataclass(slots=True)
class Finished:
    claim: Any
    outcome: Any  # the kind's outcome, an Exception, or NotStarted
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Naming:
    """How a kind's threads and log lines name it."""

    name: str  # in thread names and log lines: "delivery", "outbox"
    label: str  # what the worker of this kind is called in the log: "delivery engine", "channel worker"
    logger: logging.Logger


class Kind(Protocol):
    """What one queue supplies to the worker."""

    naming: Naming

    def policy(self) -> leases.LeasePolicy: ...

    def claim(self, limit: int, *, lease_seconds: float | None = None) -> Sequence[Any]:
        """Claims of up to ``limit`` claimable rows (delivery/leases.py's per-thread rule), each with its ``row_id``
        and ``attempt`` (the claim's token), under a lease of ``lease_seconds`` (default: the policy's)."""

    def before_attempt(self, claim: Any) -> Any | None:
        """An outcome decided without an attempt (quiet hours, a closed window), or None: attempt it."""

    def attempt(self, claim: Any) -> Finished:
        """Run the attempt (no database here)."""

    def write(self, finished: Finished) -> bool | None:
        """Write a successful or otherwise final outcome while the attempt holds the row: whether it was written;
        None when the outcome is a failure, for ``settle`` to decide."""

    def failure(self, outcome: Any) -> Failure:
        """A failed outcome (an Exception of the attempt) read as a ``Failure``."""

    def retried(self, claim: Any, error: str, due: Any) -> bool: ...

    def failed(self, claim: Any, error: str) -> bool: ...

    def put_back(self, claims: Sequence[Any]) -> int: ...

    def record_together(self, finished: list[Finished]) -> list[Finished]:
        """Write the common outcome of several attempts in one statement, where the database can; returns the rest,
        for ``settle`` one by one."""

    def close(self) -> None:
        """After the worker stopped: release what the attempts held (threads, connections)."""


# How long the claimer waits after a claim found fewer rows than it had room for, unless woken by a finished attempt;
# after being woken, how long it lets more finish so that one claim serves several free slots.
POLL_SECONDS = 0.1
GATHER_SECONDS = 0.005


class QueueWorker:
    """A ``Kind``'s queue worked by threads of this process (delivery/work.py's ``Runner``)."""

    def __init__(
        self,
        kind: Kind,
        *,
        model: Any,
        concurrency: int,
        batch: int,
        ahead: int = 0,
        recorders: int = 1,
        grace_seconds: Callable[[], float],
        gather_seconds: float = GATHER_SECONDS,
    ) -> None:
        self.kind = kind
        self.concurrency = concurrency
        self.batch = batch
        self.recorders = max(recorders, 1)
        self._grace_seconds = grace_seconds
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix=f"{kind.naming.name}-attempt")
        self._finished: queues.SimpleQueue[Finished | None] = queues.SimpleQueue()
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._stop_begun = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self.claimer: Claimer[Any] = Claimer(
            name=f"{kind.naming.name}-claimer",
            capacity=concurrency + ahead,
            batch=batch,
            claim=kind.claim,
            key=_held,
            hand_over=self._hand_over,
            renewals=leases.Renewals(model, kind.policy()),
            logger=kind.naming.logger,
            poll_seconds=POLL_SECONDS,
            gather_seconds=gather_seconds,
        )

    # --- life cycle -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.claimer.start()
        for n in range(self.recorders):
            thread = threading.Thread(
                target=self._record_loop, name=f"{self.kind.naming.name}-recorder-{n}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self.kind.naming.logger.info(
            "%s started: up to %s attempts in flight", self.kind.naming.label, self.concurrency
        )

    def in_flight(self) -> int:
        return self.claimer.in_flight()

    def begin_stop(self) -> None:
        """Claim nothing more and start nothing claimed ahead; what is in flight goes on, its leases renewed."""
        self._stopping.set()
        self.claimer.begin_stop()

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming, wait for the attempts in flight until the grace period ends, put back the rest."""
        grace = self._grace_seconds() if grace is None else grace
        self._stop_begun.set()
        self.begin_stop()
        ends_at = time.monotonic() + grace
        while self.in_flight() and time.monotonic() < ends_at and not self._hurry.is_set():
            time.sleep(0.05)
        self._finish()

    def stop_now(self) -> None:
        """Put back what is in flight at once: ends a stop under way, or stops with no grace period."""
        self._hurry.set()
        if not self._stop_begun.is_set():
            self.begin_stop()
            self._finish()

    def _finish(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        for _ in range(self.recorders):
            self._finished.put(None)  # each recorder records what has finished, then ends
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        unfinished = self.claimer.stop()  # late outcomes of these are dropped: the rows are no longer ours
        if unfinished:
            returned = self.kind.put_back(unfinished)
            self.kind.naming.logger.warning(
                "%s stopped: %s unfinished attempt(s) put back", self.kind.naming.label, returned
            )
        else:
            self.kind.naming.logger.info("%s stopped: nothing in flight", self.kind.naming.label)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.kind.close()
        connection.close()

    def drain(self, *, here: bool = False, lease_seconds: float | None = None) -> int:
        """Without threads of its own: attempt everything claimable now, batch after batch, until nothing is (a
        retry due later is left for later); returns how many ran. ``here``: one at a time in the calling thread,
        whose database connection the attempt may use (a task backend outside the database runs deliveries so);
        ``lease_seconds``: as long as the longest attempt, since nobody renews these leases."""
        ran = 0
        while claims := self.kind.claim(1 if here else self.batch, lease_seconds=lease_seconds):
            attempts = map(self._attempt_now, claims) if here else self._pool.map(self._attempt_in_pool, claims)
            for finished in attempts:
                settle(self.kind, finished)
            ran += len(claims)
        return ran

    # --- claiming and attempting ----------------------------------------------------------------------------------

    def _hand_over(self, claims: Sequence[Any]) -> None:
        for claim in claims:
            decided = self.kind.before_attempt(claim)
            if decided is not None:
                self._finished.put(Finished(claim, decided))
            else:
                self._pool.submit(self._attempt, claim)

    def _attempt(self, claim: Any) -> None:
        if self._stopping.is_set():  # claimed ahead, not begun: a stopping worker starts nothing new
            self._finished.put(Finished(claim, NotStarted()))
            return
        with database_work.attempt_thread():
            self._finished.put(self.kind.attempt(claim))

    def _attempt_in_pool(self, claim: Any) -> Finished:
        with database_work.attempt_thread():
            return self._attempt_now(claim)

    def _attempt_now(self, claim: Any) -> Finished:
        decided = self.kind.before_attempt(claim)
        if decided is not None:
            return Finished(claim, decided)
        return self.kind.attempt(claim)

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
        if finished:
            try:
                finished = self.kind.record_together(finished)
            except Exception as error:
                self.kind.naming.logger.warning(
                    "%s: recording %s outcomes together failed (%s); one by one",
                    self.kind.naming.name,
                    len(finished),
                    type(error).__name__,
                )
                connection.close()
        for one in finished:
            self._record_until_done(one)

    def _record_until_done(self, finished: Finished) -> None:
        for failures in range(1, 21):
            try:
                settle(self.kind, finished)
                return
            except Exception as error:
                connection.close()
                if self._stopped.is_set():
                    break
                name, row_id = self.kind.naming.name, finished.claim.row_id
                self.kind.naming.logger.warning("%s %s: recording failed (%s)", name, row_id, type(error).__name__)
                time.sleep(min(0.1 * 2**failures, 5.0))
                close_old_connections()
        # Its lease expires and another attempt runs it again (a delivery: same webhook-id; a text: a documented
        # duplicate).
        name, row_id = self.kind.naming.name, finished.claim.row_id
        self.kind.naming.logger.error("%s %s: its outcome could not be recorded", name, row_id)


def _held(claim: Any) -> tuple[int, int]:
    """A claim's row and attempt number (its token)."""
    return claim.row_id, claim.attempt


def settle(kind: Kind, finished: Finished) -> str:
    """The one decision of what an attempt's outcome makes of its row, written only while the attempt still holds
    it: put back (never begun: uncounted), the kind's own final write (done, held...), or for a failure, retried
    after a backoff or failed (not retryable, or the attempts are used up). Returns what it wrote: "put back",
    "written", "retried", "failed", or "skipped" when the attempt no longer held the row (taken over, put back at a
    stop, or answered meanwhile): then nothing is written."""
    claim, outcome = finished.claim, finished.outcome
    row_id, attempt = _held(claim)
    if isinstance(outcome, NotStarted):
        return "put back" if kind.put_back([claim]) else skipped(kind, row_id, attempt)
    written = kind.write(finished)
    if written is not None:
        return "written" if written else skipped(kind, row_id, attempt)
    failure = kind.failure(outcome)
    policy = kind.policy()
    if not failure.retryable or policy.gives_up_after(attempt):
        reason = failure.reason if not failure.retryable else f"{failure.reason} Gave up after {attempt} attempts."
        if not kind.failed(claim, reason):
            return skipped(kind, row_id, attempt)
        kind.naming.logger.warning("%s %s failed after %s attempt(s): %s", kind.naming.name, row_id, attempt, reason)
        return "failed"
    due = timezone.now() + timedelta(seconds=policy.backoff_seconds(attempt, failure.retry_after))
    if not kind.retried(claim, failure.reason, due):
        return skipped(kind, row_id, attempt)
    kind.naming.logger.info(
        "%s %s: attempt %s failed (%s); retry at %s", kind.naming.name, row_id, attempt, failure.reason, due.isoformat()
    )
    return "retried"


def skipped(kind: Kind, row_id: int, attempt: int) -> str:
    """Log that an attempt's outcome is dropped: it no longer holds its row."""
    kind.naming.logger.warning(
        "%s %s: attempt %s no longer holds it (taken over, put back or answered); its outcome is dropped",
        kind.naming.name,
        row_id,
        attempt,
    )
    return "skipped"
