"""Deliveries by status and the age of the oldest queued one, read from the database at scrape time (the task
worker may run on another machine; the database is what they share). Registered with ops/exposition.py when the app
is ready."""

import logging
from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conversations.models import Delivery, DeliveryStatus

logger = logging.getLogger(__name__)


class DeliveriesByStatus(Collector):
    """One GROUP BY and one MIN per scrape (the (status, created_at) index serves both), never per request."""

    def collect(self) -> Iterator[Metric]:
        try:
            rows = Delivery.objects.order_by().values_list("status").annotate(n=Count("id"))
            counts = dict(rows)
            oldest = Delivery.objects.filter(status=DeliveryStatus.QUEUED).aggregate(at=Min("created_at"))["at"]
        except Exception as error:
            # A scrape must still return the request counters when the database is down.
            logger.warning("metrics: deliveries not counted (%s)", type(error).__name__)
            return
        family = GaugeMetricFamily(
            "ingest_deliveries", "Deliveries by status, counted in the database at scrape time.", labels=["status"]
        )
        for status in DeliveryStatus.values:
            family.add_metric([status], counts.get(status, 0))
        yield family
        # How far the hand-off is behind acceptance: 0 with nothing queued. A queue that drains keeps this near the
        # assistant's answer time; one that grows without bound is the sign that the workers do not keep up.
        age = 0.0 if oldest is None else max((timezone.now() - oldest).total_seconds(), 0.0)
        yield GaugeMetricFamily(
            "ingest_delivery_oldest_queued_age_seconds",
            "Seconds since the oldest still-queued delivery was accepted (0 when none is queued).",
            value=age,
        )
