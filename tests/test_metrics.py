"""Prometheus metrics: counted on every request at no database cost, served only to operators."""

import socket
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY

from conversations.models import Delivery, DeliveryStatus
from delivery.tasks import deliver_message
from keys import tokens
from keys.models import Generation
from ops import metrics
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key

TOKEN = "metrics-token-for-tests-0123456789"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client, **meta: str):
    return client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, **meta)


def test_metrics_do_not_exist_until_an_operator_configures_who_may_read_them(client):
    assert client.get("/metrics").status_code == 404


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_metrics_refuse_a_missing_or_wrong_token(client, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get("/metrics", headers=headers)

    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"
    assert "http_requests_total" not in response.content.decode()


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_metrics_are_served_with_the_token(client):
    response = scrape(client)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    body = response.content.decode()
    assert "# TYPE http_requests_total counter" in body
    assert 'ingest_deliveries{status="queued"}' in body


@override_settings(METRICS_ALLOWED_IPS=["10.0.0.0/8", "192.0.2.7"])
@pytest.mark.django_db
@pytest.mark.parametrize(("address", "status"), [("10.20.30.40", 200), ("192.0.2.7", 200), ("192.0.2.8", 403)])
def test_metrics_can_be_limited_to_client_networks(client, address, status):
    assert client.get("/metrics", REMOTE_ADDR=address).status_code == status


@override_settings(METRICS_ALLOWED_IPS=["10.0.0.0/8"], METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_with_both_set_metrics_need_both_the_network_and_the_token(client):
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.1").status_code == 401
    assert scrape(client, REMOTE_ADDR="127.0.0.1").status_code == 403  # the test client's default address
    assert scrape(client, REMOTE_ADDR="10.0.0.1").status_code == 200


@pytest.mark.django_db
def test_an_accepted_message_is_counted(client, v2):
    accepted = sample("ingest_messages_accepted_total", endpoint="api_message")
    served = sample("http_requests_total", endpoint="api_message", method="POST", status="200")
    timed = sample("http_request_duration_seconds_count", endpoint="api_message", status="200")

    assert post(client, CURRENT, v2[1], {"message": "hi"}).status_code == 200

    assert sample("ingest_messages_accepted_total", endpoint="api_message") == accepted + 1
    assert sample("http_requests_total", endpoint="api_message", method="POST", status="200") == served + 1
    assert sample("http_request_duration_seconds_count", endpoint="api_message", status="200") == timed + 1


@pytest.mark.django_db
def test_a_replayed_idempotent_request_is_not_counted_as_accepted_again(client, v2):
    accepted = sample("ingest_messages_accepted_total", endpoint="legacy_webhook")
    _, v1 = make_key(generation=Generation.V1)

    for _ in range(3):
        response = post(client, LEGACY, v1, {"message": "hi"}, **{"Idempotency-Key": "nightly-42"})
        assert response.status_code == 200

    assert response["Idempotent-Replayed"] == "true"
    assert sample("ingest_messages_accepted_total", endpoint="legacy_webhook") == accepted + 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "key", "body", "reason", "endpoint"),
    [
        (CURRENT, "psk_notakey", {"message": "hi"}, "invalid_api_key", "api_message"),
        (CURRENT, None, {"message": "hi"}, "missing_authorization", "api_message"),
        (CURRENT, "v2", {"message": "  "}, "invalid_body", "api_message"),
        (LEGACY, "v2", {"message": "hi"}, "wrong_key_generation", "legacy_webhook"),
    ],
)
def test_refused_requests_are_counted_by_reason(client, v2, path, key, body, reason, endpoint):
    before = sample("ingest_requests_rejected_total", endpoint=endpoint, reason=reason)

    response = post(client, path, v2[1] if key == "v2" else key, body)

    assert response.json()["code"] == reason
    assert sample("ingest_requests_rejected_total", endpoint=endpoint, reason=reason) == before + 1


def test_other_modules_count_rate_limits_and_delivery_outcomes_through_small_functions():
    limited = sample("ingest_rate_limited_total", scope="key")
    delivered = sample("ingest_delivery_attempts_total", outcome="delivered")

    metrics.rate_limited("key")
    metrics.delivery_attempt_finished("delivered")

    assert sample("ingest_rate_limited_total", scope="key") == limited + 1
    assert sample("ingest_delivery_attempts_total", outcome="delivered") == delivered + 1


def test_invented_methods_share_one_label(client):
    before = sample("http_requests_total", endpoint="unmatched", method="OTHER", status="404")
    client.generic("BREW", "/no-such-page/")
    assert sample("http_requests_total", endpoint="unmatched", method="OTHER", status="404") == before + 1


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_deliveries_are_counted_by_status_from_the_database(client, v2):
    post(client, CURRENT, v2[1], {"message": "one"})
    post(client, CURRENT, v2[1], {"message": "two"})

    body = scrape(client).content.decode()

    assert 'ingest_deliveries{status="queued"} 2.0' in body
    assert 'ingest_deliveries{status="failed"} 0.0' in body


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_finished_deliveries_are_counted_over_the_last_hour_only(client, v2):
    """Delivered and failed are read through the (status, created_at) index over the last hour, and queued and
    processing through the pending deliveries' partial index: a scrape's cost does not grow with history."""
    from datetime import timedelta

    from django.utils import timezone

    from conversations.models import Delivery, DeliveryStatus

    for text in ("old", "recent"):
        post(client, CURRENT, v2[1], {"message": text})
    Delivery.objects.update(status=DeliveryStatus.DELIVERED)
    Delivery.objects.filter(message__text="old").update(created_at=timezone.now() - timedelta(hours=2))

    body = scrape(client).content.decode()

    assert 'ingest_deliveries{status="delivered"} 1.0' in body
    assert 'ingest_deliveries{status="queued"} 0.0' in body


@pytest.mark.django_db
def test_the_scrapes_queries_are_bounded_by_an_index(django_assert_max_num_queries):
    """On PostgreSQL, with sequential scans priced out, every scan of the queue's state is bounded: by an index
    condition, or by a partial index of the pending deliveries. A whole-table GROUP BY shows as a Seq Scan, or as an
    index scan with no condition."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from delivery.metrics import queue_state

    if connection.vendor != "postgresql":
        pytest.skip("the plans are PostgreSQL's (CI's PostgreSQL pass)")
    with CaptureQueriesContext(connection) as queries:
        queue_state()
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        for query in queries:
            cursor.execute(f"EXPLAIN {query['sql']}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert not _unbounded_scans(plan), (query["sql"], plan)
        cursor.execute("RESET enable_seqscan")


@pytest.mark.django_db
def test_a_key_over_its_rate_limit_is_counted_as_rate_limited(client, v2, settings):
    settings.INGEST_RATE_LIMIT = "1/m"
    limited = sample("ingest_rate_limited_total", scope="key")
    rejected = sample("ingest_requests_rejected_total", endpoint="api_message", reason="rate_limited")

    statuses = [post(client, CURRENT, v2[1], {"message": "hi"}).status_code for _ in range(3)]

    assert statuses == [200, 429, 429]
    assert sample("ingest_rate_limited_total", scope="key") == limited + 2
    assert sample("ingest_requests_rejected_total", endpoint="api_message", reason="rate_limited") == rejected + 2


@pytest.mark.django_db
def test_an_address_over_the_failed_authentication_limit_is_counted_by_its_scope(client, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "1/m"
    limited = sample("ingest_rate_limited_total", scope="client_ip")

    statuses = [post(client, CURRENT, tokens.generate(Generation.V2), {"message": "hi"}).status_code for _ in range(3)]

    assert statuses == [401, 429, 429]
    assert sample("ingest_rate_limited_total", scope="client_ip") == limited + 2


@pytest.mark.django_db
def test_hand_off_attempts_are_counted_by_outcome(send, v2, settings):
    def counted(outcome: str) -> float:
        return sample("ingest_delivery_attempts_total", outcome=outcome)

    before = {outcome: counted(outcome) for outcome in ("delivered", "retrying", "failed")}

    send(v2[1], {"message": "to the built-in assistant"})
    assert counted("delivered") == before["delivered"] + 1

    with socket.socket() as probe:  # a port nothing listens on: the remote assistant is down
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = f"http://127.0.0.1:{port}/hook"
    settings.ASSISTANT_WEBHOOK_KEY = b"k" * 32
    settings.ASSISTANT_MAX_ATTEMPTS = 2
    send(v2[1], {"message": "to a runtime that is down"})
    assert counted("retrying") == before["retrying"] + 1

    retry = Delivery.objects.get(status=DeliveryStatus.QUEUED)
    Delivery.objects.filter(pk=retry.pk).update(next_attempt_at=None)  # its retry's time has come
    deliver_message.call(retry.message.public_id)
    assert counted("failed") == before["failed"] + 1
    assert counted("delivered") == before["delivered"] + 1


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_the_oldest_queued_delivery_age_is_zero_with_nothing_queued(client):
    assert "ingest_delivery_oldest_queued_age_seconds 0.0" in scrape(client).content.decode()


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_the_oldest_queued_delivery_age_counts_from_its_acceptance(client, v2):
    post(client, CURRENT, v2[1], {"message": "waiting"})
    post(client, CURRENT, v2[1], {"message": "delivered long ago"})
    waiting, delivered = Delivery.objects.order_by("created_at")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Delivery.objects.filter(pk=waiting.pk).update(created_at=an_hour_ago + timedelta(minutes=30))
    Delivery.objects.filter(pk=delivered.pk).update(created_at=an_hour_ago, status=DeliveryStatus.DELIVERED)

    body = scrape(client).content.decode()

    line = next(row for row in body.splitlines() if row.startswith("ingest_delivery_oldest_queued_age_seconds "))
    assert 30 * 60 <= float(line.split()[1]) < 31 * 60


@override_settings(METRICS_TOKEN=TOKEN)
@pytest.mark.django_db
def test_in_flight_and_accept_to_delivered_latency_are_read_from_the_database(client, v2):
    for text in ("a", "b", "c", "d"):
        post(client, CURRENT, v2[1], {"message": text})
    fast, slow, attempting, old = Delivery.objects.order_by("pk")
    now = timezone.now()
    Delivery.objects.update(status=DeliveryStatus.DELIVERED)
    Delivery.objects.filter(pk=fast.pk).update(
        created_at=now - timedelta(seconds=10), finished_at=now - timedelta(seconds=9)
    )
    Delivery.objects.filter(pk=slow.pk).update(
        created_at=now - timedelta(seconds=10), finished_at=now - timedelta(seconds=7)
    )
    Delivery.objects.filter(pk=attempting.pk).update(status=DeliveryStatus.PROCESSING)
    # accepted before the 5-minute window: not in the figures
    Delivery.objects.filter(pk=old.pk).update(created_at=now - timedelta(minutes=6), finished_at=now)

    body = scrape(client).content.decode()

    assert "ingest_deliveries_in_flight 1.0" in body
    assert "ingest_deliveries_recently_delivered 2.0" in body
    p50 = next(r for r in body.splitlines() if r.startswith('ingest_delivery_latency_seconds{quantile="0.5"}'))
    p99 = next(r for r in body.splitlines() if r.startswith('ingest_delivery_latency_seconds{quantile="0.99"}'))
    assert float(p50.split()[1]) == pytest.approx(2.0, abs=0.01)
    assert float(p99.split()[1]) == pytest.approx(2.98, abs=0.01)


def _unbounded_scans(plan: str) -> list[str]:
    lines = plan.splitlines()
    unbounded = []
    for at, line in enumerate(lines):
        if "Seq Scan" in line:
            unbounded.append(line)
        elif (
            "Index" in line
            and "Scan" in line
            and " on delivery_pending" not in line
            and "using delivery_pending" not in line
        ):
            detail = " ".join(lines[at + 1 : at + 3])
            if "Index Cond" not in detail:
                unbounded.append(line)
    return unbounded
