"""Requests per day for a key's chart, and the chart's geometry."""

from datetime import date, datetime, timedelta

import pytest
from django.utils import timezone

from console import activity
from conversations.models import Delivery, Endpoint
from ingestion.hotpath.recording import record_user_message
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db


def deliver(key, at: datetime) -> None:
    message = record_user_message(user=key.owner, endpoint=Endpoint.CURRENT, text="hi", api_key=key)
    Delivery.objects.filter(message=message).update(created_at=at)


def test_requests_are_counted_per_day_over_14_days_including_empty_days():
    key, _ = make_key(UserFactory())
    today = timezone.localdate()
    noon = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    deliver(key, noon)
    deliver(key, noon.replace(hour=0, minute=0))  # first instant of the day
    deliver(key, noon - timedelta(days=13))  # oldest day in the window
    deliver(key, noon - timedelta(days=14))  # just outside
    other, _ = make_key(key.owner)
    deliver(other, noon)

    series = activity.requests_per_day(key, today=today)

    assert [day.day for day in series] == [today - timedelta(days=13 - n) for n in range(14)]
    assert series[-1].requests == 2
    assert series[0].requests == 1
    assert sum(day.requests for day in series) == 3


def test_the_tallest_bar_fills_the_plot_and_empty_days_have_no_bar():
    series = [activity.Day(date(2026, 1, 1) + timedelta(days=n), count) for n, count in enumerate([0, 5, 10, 1])]

    chart = activity.bar_chart(series)

    heights = [bar.height for bar in chart.bars]
    plot = activity.HEIGHT - activity.TOP - activity.BOTTOM
    assert heights[0] == 0
    assert heights[2] == plot
    assert heights[1] == plot / 2
    assert heights[3] >= 2  # one request among many stays visible
    assert all(bar.y + bar.height == chart.baseline for bar in chart.bars)
    assert (chart.total, chart.peak) == (16, 10)
    assert chart.bars[-1].show_day_label


def test_a_chart_of_no_requests_draws_nothing_tall():
    series = [activity.Day(date(2026, 1, 1) + timedelta(days=n), 0) for n in range(14)]
    chart = activity.bar_chart(series)
    assert chart.total == 0
    assert all(bar.height == 0 for bar in chart.bars)
