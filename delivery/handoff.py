"""One attempt outside the delivery engine: the task of the immediate backend (and of any task backend other than
the database), run in the calling thread. It claims like the engine (due, first in its thread; delivery/lifecycle.py)
under a lease as long as the longest attempt, since nobody renews it, and records like the engine
(delivery/engine.py ``record``)."""

import logging
import time
from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from assistant.backends import backend_named
from assistant.outcomes import Outcome
from conversations.models import Delivery, DeliveryStatus
from delivery import lifecycle, queue
from delivery.engine import record

logger = logging.getLogger(__name__)


def attempt_delivery(delivery_id: int, deferrable: bool = False) -> str:
    """Claim the delivery if it is claimable, hand its message to the configured assistant backend and record what
    happened; returns the delivery's status after, or "skipped" (not claimable: delivered, failed, behind an earlier
    message of its thread, not yet due, or held by another attempt). After a transient failure the delivery is
    queued again with its ``next_attempt_at``; the caller enqueues the retry when its task backend can defer one
    (``deferrable``), else the log says who will pick it up."""
    claims = queue.claim(1, delivery_id, lease_seconds=lifecycle.unrenewed_lease_seconds())
    if not claims:
        return "skipped"
    claim = claims[0]
    started = time.monotonic()
    outcome: Outcome | Exception
    try:
        outcome = backend_named(claim.backend)(claim.request)
    except Exception as error:
        outcome = error
    status = record(claim, outcome, time.monotonic() - started)
    if status == DeliveryStatus.QUEUED and not deferrable:
        logger.warning(
            "delivery %s: the task backend cannot defer, so its retry waits for `manage.py retrydeliveries --due`",
            delivery_id,
        )
    return status


def due_deliveries(grace: timedelta) -> QuerySet[Delivery]:
    """Deliveries that should have been attempted by now: a retry whose time has come (the immediate backend
    cannot defer one), a task that never got enqueued, an attempt whose worker died."""
    cutoff = timezone.now() - grace
    return Delivery.objects.filter(
        Q(status=DeliveryStatus.QUEUED, next_attempt_at__lte=cutoff)
        | Q(status=DeliveryStatus.QUEUED, next_attempt_at__isnull=True, created_at__lte=cutoff)
        | lifecycle.abandoned(timezone.now())
    )
