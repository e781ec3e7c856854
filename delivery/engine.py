"""The delivery engine: deliveries handed to the assistant by the one queue worker (delivery/queue_worker.py), with
many attempts in flight in one process and few database connections. This module says only what is particular to a
delivery: its claim (delivery/queue.py: the message, its key and the recent thread, in one statement), its attempt
(the assistant backend, on a thread that holds no database connection: what a tool-using attempt must read or write
goes to DELIVERY_DATABASE_THREADS database threads, ops/database_work.py) and what its outcomes write
(delivery/lifecycle.py: the reply into the thread and the delivery delivered; every reply that finished together in
one statement on PostgreSQL).

The process holds at most 1 (the claimer) + DELIVERY_RECORDERS + DELIVERY_DATABASE_THREADS database connections
whatever DELIVERY_CONCURRENCY is. Leases, stopping and SIGKILL: delivery/queue_worker.py (grace:
DELIVERY_GRACE_SECONDS).
"""

import logging
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from assistant.backends import backend_named
from assistant.outcomes import Accepted, Outcome, PermanentFailure, Reply, TransientFailure
from conversations.models import Delivery
from delivery import lifecycle, queue
from delivery.queue import Claim
from delivery.queue_worker import Failure, Finished, Naming, QueueWorker, skipped
from ops import database_work, metrics

logger = logging.getLogger("delivery.handoff")


class Deliveries:
    """What is particular to a delivery, for the queue worker (delivery/queue_worker.py ``Kind``)."""

    naming = Naming("delivery", "delivery engine", logger)
    policy = staticmethod(lifecycle.policy)
    claim = staticmethod(queue.claim)

    def before_attempt(self, claim: Claim) -> None:
        return None

    def attempt(self, claim: Claim) -> Finished:
        """Hand the claim to its backend (on an attempt thread: see the module)."""
        started = time.monotonic()
        outcome: Outcome | Exception
        try:
            outcome = backend_named(claim.backend)(claim.request)
        except Exception as error:
            outcome = error
        return Finished(claim, outcome, time.monotonic() - started)

    def write(self, finished: Finished) -> bool | None:
        """A reply, or accepted (the reply comes through the callback): delivered."""
        if isinstance(finished.outcome, Exception):
            return None
        if not lifecycle.delivered([(finished.claim.held, _reply_text(finished.outcome))]):
            return False  # settle says so
        _log_delivered(finished.claim, finished.seconds)
        return True

    def failure(self, outcome: Exception) -> Failure:
        if isinstance(outcome, PermanentFailure):
            return Failure(str(outcome), retryable=False)
        if isinstance(outcome, TransientFailure):
            return Failure(str(outcome), retry_after=outcome.retry_after)
        logger.error("delivery: unexpected error in the assistant backend", exc_info=outcome)
        return Failure(f"Unexpected error: {type(outcome).__name__}.")

    def retried(self, claim: Claim, error: str, due: Any) -> bool:
        if not lifecycle.retry_later(claim.held, error, due):
            return False
        metrics.delivery_attempt_finished("retrying")
        return True

    def failed(self, claim: Claim, error: str) -> bool:
        if not lifecycle.failed(claim.held, error):
            return False
        metrics.delivery_attempt_finished("failed")
        return True

    def put_back(self, claims: Sequence[Claim]) -> int:
        return lifecycle.put_back([claim.held for claim in claims])

    def record_together(self, finished: list[Finished]) -> list[Finished]:
        """Every attempt the assistant took, in one statement on PostgreSQL; the rest (failures, put-backs) for
        ``settle``."""
        taken = [f for f in finished if isinstance(f.outcome, Reply | Accepted)]
        written = lifecycle.delivered([(f.claim.held, _reply_text(f.outcome)) for f in taken])
        for f in taken:
            if f.claim.delivery_id in written:
                _log_delivered(f.claim, f.seconds)
            else:
                skipped(self, f.claim.delivery_id, f.claim.attempt)
        return [f for f in finished if not isinstance(f.outcome, Reply | Accepted)]

    def close(self) -> None:
        database_work.shutdown()


DELIVERIES = Deliveries()


class Engine(QueueWorker):
    def __init__(self, concurrency: int | None = None, batch: int | None = None) -> None:
        super().__init__(
            DELIVERIES,
            model=Delivery,
            concurrency=concurrency or settings.DELIVERY_CONCURRENCY,
            batch=batch or settings.DELIVERY_CLAIM_BATCH,
            recorders=settings.DELIVERY_RECORDERS,
            grace_seconds=lambda: float(settings.DELIVERY_GRACE_SECONDS),
        )


def deliver_here() -> int:
    """Deliver what is claimable now, one at a time in the calling thread (whose database connection a tool may use),
    each under a lease as long as the longest attempt since nobody renews it: how a task backend outside the database
    runs deliveries (delivery/tasks.py), by the engine's own claim, attempt and ``settle``. Returns how many ran."""
    return Engine(concurrency=1).drain(here=True, lease_seconds=lifecycle.unrenewed_lease_seconds())


def _reply_text(outcome: Outcome) -> str | None:
    return outcome.text if isinstance(outcome, Reply) else None


def _log_delivered(claim: Claim, seconds: float) -> None:
    metrics.delivery_attempt_finished("delivered")
    logger.info(
        "delivery %s delivered on attempt %s (%s, %.0f ms)",
        claim.delivery_id,
        claim.attempt,
        claim.backend,
        seconds * 1000,
    )
