"""Deliveries by status and the age of the oldest queued one, read from the database at scrape time (the task
worker may run on another machine; the database is what they share). Registered with ops/exposition.py when the app
is ready."""

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conversations.models import Delivery, DeliveryStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueState:
    """Deliveries by status and how long the oldest queued one has waited since it was accepted (0: none)."""

    counts: dict[str, int]
    oldest_queued_age_seconds: float

    @property
    def backlog(self) -> int:
        return self.counts.get(DeliveryStatus.QUEUED, 0)

    @property
    def in_flight(self) -> int:
        return self.counts.get(DeliveryStatus.PROCESSING, 0)


def queue_state() -> QueueState:
    """One GROUP BY and one MIN (the (status, created_at) index serves both): for a scrape or the admin's list,
    never per request."""
    counts = dict(Delivery.objects.order_by().values_list("status").annotate(n=Count("id")))
    oldest = Delivery.objects.filter(status=DeliveryStatus.QUEUED).aggregate(at=Min("created_at"))["at"]
    age = 0.0 if oldest is None else max((timezone.now() - oldest).total_seconds(), 0.0)
    return QueueState(counts, age)


class DeliveriesByStatus(Collector):
    """The queue's state read once per scrape."""

    def collect(self) -> Iterator[Metric]:
        try:
            state = queue_state()
        except Exception as error:
            # A scrape must still return the request counters when the database is down.
            logger.warning("metrics: deliveries not counted (%s)", type(error).__name__)
            return
        family = GaugeMetricFamily(
            "ingest_deliveries", "Deliveries by status, counted in the database at scrape time.", labels=["status"]
        )
        for status in DeliveryStatus.values:
            family.add_metric([status], state.counts.get(status, 0))
        yield family
        # How far the hand-off is behind acceptance: 0 with nothing queued. A queue that drains keeps this near the
        # assistant's answer time; one that grows without bound is the sign that the workers do not keep up.
        yield GaugeMetricFamily(
            "ingest_delivery_oldest_queued_age_seconds",
            "Seconds since the oldest still-queued delivery was accepted (0 when none is queued).",
            value=state.oldest_queued_age_seconds,
        )
