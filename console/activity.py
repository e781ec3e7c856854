"""A key's requests per day, and the geometry of the small bar chart the key's page draws as inline SVG."""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import Count, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from conversations.models import Delivery, Endpoint
from keys.models import ApiKey

DAYS = 14

# The drawing's coordinates. Across, they are written as percentages of the SVG's width (x_pct, width_pct, ...), so
# the bars stretch to any width while the labels keep their size in CSS pixels: a viewBox scaled to a phone's width
# shrank them to 4 px. Down, they are pixels of a chart HEIGHT tall.
WIDTH = 720
HEIGHT = 180
TOP = 22  # room for the count above the tallest bar
BOTTOM = 28  # room for the day labels
GAP = 6


@dataclass(frozen=True, slots=True)
class Day:
    day: date
    requests: int


@dataclass(frozen=True, slots=True)
class Bar:
    day: date
    requests: int
    x_pct: float
    width_pct: float
    right_pct: float  # the newest day's label ends at its bar's right edge, inside the chart (centred, it was cut off)
    label_x_pct: float
    y: float
    height: float
    count_y: float
    show_day_label: bool
    # At phone width only one day in four is labelled (the newest always), so that labels never overlap there.
    show_day_label_narrow: bool = False


def _pct(across: float) -> float:
    """A distance across, in the drawing's pixels rounded to hundredths, as a percentage of its width."""
    return round(round(across, 2) * 100 / WIDTH, 3)


@dataclass(frozen=True, slots=True)
class Chart:
    bars: list[Bar]
    total: int
    peak: int
    first_day: date | None
    last_day: date | None
    width: int = WIDTH
    height: int = HEIGHT
    baseline: int = HEIGHT - BOTTOM
    empty_bar_y: int = HEIGHT - BOTTOM - 2
    day_label_y: int = HEIGHT - 8


# What a key sent (its messages through the API). An approval the owner gives for one of them is recorded as a
# delivery carrying the key too (its origin decides the approval rule), but it is the owner's answer, not a request.
KEY_REQUESTS = (Endpoint.CURRENT, Endpoint.LEGACY)


def requests_of(key: ApiKey) -> QuerySet[Delivery]:
    return Delivery.objects.filter(api_key=key, endpoint__in=KEY_REQUESTS)


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def requests_per_day(key: ApiKey, days: int = DAYS, today: date | None = None) -> list[Day]:
    """Every day of the window, oldest first, including the days without requests (in the site's time zone)."""
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    # A range on created_at itself, so the (api_key, created_at) index bounds the read to the window: a filter on
    # its date (created_at__date) read every delivery the key ever made.
    start, end = _start_of(first), _start_of(today + timedelta(days=1))
    rows = (
        requests_of(key)
        .filter(created_at__gte=start, created_at__lt=end)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(requests=Count("id"))
        .values_list("day", "requests")
    )
    counts = dict(rows)
    window = [first + timedelta(days=offset) for offset in range(days)]
    return [Day(day, counts.get(day, 0)) for day in window]


def bar_chart(series: list[Day]) -> Chart:
    peak = max((day.requests for day in series), default=0)
    slot = WIDTH / max(len(series), 1)
    plot_height = HEIGHT - TOP - BOTTOM
    bars = []
    for index, day in enumerate(series):
        # Days with requests get at least a sliver, so that one request among hundreds is still visible.
        height = 0.0 if day.requests == 0 else max(plot_height * day.requests / peak, 2.0)
        x, width = index * slot + GAP / 2, slot - GAP
        bars.append(
            Bar(
                day=day.day,
                requests=day.requests,
                x_pct=_pct(x),
                width_pct=_pct(width),
                right_pct=round((round(x, 2) + round(width, 2)) * 100 / WIDTH, 3),
                label_x_pct=_pct(x + width / 2),
                y=round(HEIGHT - BOTTOM - height, 2),
                height=round(height, 2),
                count_y=round(HEIGHT - BOTTOM - height - 6, 2),
                # Every other day is labelled (the newest always), so that labels never overlap at phone width.
                show_day_label=(len(series) - 1 - index) % 2 == 0,
                show_day_label_narrow=(len(series) - 1 - index) % 4 == 0,
            )
        )
    return Chart(
        bars=bars,
        total=sum(day.requests for day in series),
        peak=peak,
        first_day=series[0].day if series else None,
        last_day=series[-1].day if series else None,
    )
