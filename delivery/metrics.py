"""Deliveries by status and the age of the oldest queued one, read from the database at scrape time (the task
worker may run on another machine; the database is what they share). Registered with ops/exposition.py when the app
is ready."""

import logging
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conversations.models import PENDING, Delivery, DeliveryStatus

logger = logging.getLogger(__name__)

# Accept→delivered latency is read over the deliveries accepted this long before a scrape.
LATENCY_WINDOW = timedelta(minutes=5)


@dataclass(frozen=True)
class QueueState:
    """Deliveries by status and how long the oldest queued one has waited since it was accepted (0: none)."""

    counts: dict[str, int]
    oldest_queued_age_seconds: float
    # Of the deliveries accepted in the last LATENCY_WINDOW and delivered: how many, and the median and 99th
    # percentile of the seconds from acceptance to the end of the attempt that delivered them (None: none).
    recently_delivered: int = 0
    latency_p50_seconds: float | None = None
    latency_p99_seconds: float | None = None

    @property
    def backlog(self) -> int:
        return self.counts.get(DeliveryStatus.QUEUED, 0)

    @property
    def in_flight(self) -> int:
        return self.counts.get(DeliveryStatus.PROCESSING, 0)


# Delivered and failed deliveries are counted over those accepted this long before a scrape: counting all of history
# read every delivery ever made at every scrape (11 ms at 27k rows, 497 ms at 2.5M).
FINISHED_WINDOW = timedelta(hours=1)


def queue_state() -> QueueState:
    """Two GROUP BYs, one MIN and one percentile aggregate, each bounded by an index to what is pending or recent
    (the pending deliveries' partial index, the (status, created_at) index), so a scrape costs the same at any size
    of history: for a scrape or the admin's list, never per request."""
    pending = Delivery.objects.filter(status__in=PENDING)
    finished = Delivery.objects.filter(
        status__in=(DeliveryStatus.DELIVERED, DeliveryStatus.FAILED), created_at__gte=timezone.now() - FINISHED_WINDOW
    )
    counts = {status: 0 for status in DeliveryStatus.values}
    for rows in (pending, finished):
        counts.update(rows.order_by().values_list("status").annotate(n=Count("id")))
    oldest = Delivery.objects.filter(status=DeliveryStatus.QUEUED).aggregate(at=Min("created_at"))["at"]
    age = 0.0 if oldest is None else max((timezone.now() - oldest).total_seconds(), 0.0)
    delivered, p50, p99 = _recent_latency()
    return QueueState(counts, age, delivered, p50, p99)


_PERCENTILES = """
    SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.99) WITHIN GROUP (ORDER BY s)
    FROM (SELECT extract(epoch FROM finished_at - created_at) AS s FROM {delivery}
          WHERE status = 'delivered' AND created_at >= %s AND finished_at IS NOT NULL) AS recent
"""


def _recent_latency() -> tuple[int, float | None, float | None]:
    """Accept→delivered over the last LATENCY_WINDOW: on PostgreSQL one aggregate over the (status, created_at)
    index; elsewhere (SQLite, development) from the rows."""
    since = timezone.now() - LATENCY_WINDOW
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PERCENTILES.format(delivery=connection.ops.quote_name(Delivery._meta.db_table)), [since])
            count, p50, p99 = cursor.fetchone()
        return count, None if p50 is None else float(p50), None if p99 is None else float(p99)
    rows = Delivery.objects.filter(
        status=DeliveryStatus.DELIVERED, created_at__gte=since, finished_at__isnull=False
    ).values_list("created_at", "finished_at")[:100_000]
    seconds = sorted((finished - created).total_seconds() for created, finished in rows if finished is not None)
    if not seconds:
        return 0, None, None
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")  # one value: itself (Python 3.13)
    return len(seconds), statistics.median(seconds), cuts[98]


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
            "ingest_deliveries",
            "Deliveries by status at scrape time: every queued and processing one; delivered and failed among those "
            "accepted in the last hour.",
            labels=["status"],
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
        yield GaugeMetricFamily(
            "ingest_deliveries_in_flight",
            "Deliveries being attempted right now (processing), across every worker.",
            value=state.in_flight,
        )
        latency = GaugeMetricFamily(
            "ingest_delivery_latency_seconds",
            "Seconds from acceptance to delivery, over the deliveries accepted in the last 5 minutes.",
            labels=["quantile"],
        )
        for quantile, value in (("0.5", state.latency_p50_seconds), ("0.99", state.latency_p99_seconds)):
            if value is not None:
                latency.add_metric([quantile], value)
        yield latency
        yield GaugeMetricFamily(
            "ingest_deliveries_recently_delivered",
            "Deliveries accepted in the last 5 minutes and delivered (what the latency quantiles are read from).",
            value=state.recently_delivered,
        )
