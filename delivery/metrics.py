"""Deliveries by status, read from the database at scrape time (the task worker may run on another machine; the
database is what they share). Registered with ops/exposition.py when the app is ready."""

import logging
from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conversations.models import Delivery, DeliveryStatus

logger = logging.getLogger(__name__)


class DeliveriesByStatus(Collector):
    """One GROUP BY per scrape (the status index serves it), never per request."""

    def collect(self) -> Iterator[Metric]:
        try:
            rows = Delivery.objects.order_by().values_list("status").annotate(n=Count("id"))
            counts = dict(rows)
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
