"""The database goes away mid-traffic (docs/design.md#errors, 503): callers get the JSON 503, nothing is
half-written, and the service recovers by itself when the database is back; retries with their Idempotency-Key then
leave exactly one message per request.

The machine's PostgreSQL is shared, so it is never stopped: a TCP proxy on 127.0.0.1 sits between gunicorn and it,
and the test cuts that proxy (every open connection dropped, new ones refused) and restores it."""

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.live_stack import (
    CuttableProxy,
    Gunicorn,
    postgres_server_url,
    private_database,
    require_postgres_and_redis,
    run_python,
    send,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("live_stack")]  # see tests/live_stack.py

CURRENT = "/api/v1/inbound/api-message"
MAX_REQUESTS = 600  # bounds the traffic whatever the timings

MAKE_KEY = """
import json
from django.contrib.auth import get_user_model
from keys.services import create_key
_, plaintext = create_key(get_user_model().objects.create_user("owner", "owner@example.com", "pw"), "monitoring")
print(json.dumps(plaintext))
"""


def through(proxy: CuttableProxy, database_url: str) -> str:
    parts = urlsplit(database_url)
    credentials, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{proxy.port}"))


def counts(db) -> tuple[int, int, int]:
    return db.execute(
        "SELECT (SELECT count(*) FROM conversations_message WHERE role = 'user'),"
        " (SELECT count(*) FROM conversations_delivery),"
        " (SELECT count(*) FROM ingestion_idempotencyrecord)"
    ).fetchone()


def test_requests_get_a_json_503_while_the_database_is_away_and_succeed_again_after(monkeypatch):
    require_postgres_and_redis()
    server = urlsplit(postgres_server_url())
    with private_database("outage") as database_url:
        key = run_python(MAKE_KEY, {"DATABASE_URL": database_url})
        proxy = CuttableProxy(server.hostname or "127.0.0.1", server.port or 5432)
        web = Gunicorn(
            {
                "DATABASE_URL": through(proxy, database_url),
                "TASK_BACKEND": "database",
                "INGEST_RATE_LIMIT": "100000/m",
                "AUTH_FAILURE_RATE_LIMIT": "100000/m",
            }
        )
        try:
            traffic = Traffic()
            with ThreadPoolExecutor(4) as pool:
                for _ in range(4):
                    pool.submit(traffic.run, web.url, key)
                try:  # no sleeps: each step waits (bounded) for what the answers show
                    assert traffic.wait_for(lambda sent: successes(sent) >= 5), "no traffic got through at first"
                    proxy.cut()
                    cut_at = len(traffic.sent)
                    traffic.wait_for(lambda sent: refusals(sent[cut_at:]) >= 5)
                    proxy.restore()
                    restored_at = len(traffic.sent)
                    recovered = traffic.wait_for(lambda sent: successes(sent[restored_at:]) >= 1)
                finally:
                    traffic.stop.set()
            sent = traffic.sent

            statuses = Counter(status for _, _, status, _ in sent)
            assert set(statuses) <= {200, 503}, statuses
            assert statuses[503] > 0, "the outage was not observed"
            assert recovered, "no request succeeded after the database came back"
            for _, _, status, answer in sent:
                if status == 503:
                    assert answer == answer | {"success": False, "code": "service_unavailable"}
                    assert "nothing was recorded" in answer["message"]

            with psycopg.connect(database_url, autocommit=True) as db:
                messages, deliveries, claims = counts(db)
                # Nothing half-written: every message has its delivery and its Idempotency-Key record, or none is there.
                assert messages == deliveries == claims
                assert messages >= statuses[200]

                # Retrying every refused request with its key records the missing ones, and never one twice.
                refused = [(idempotency_key, body) for idempotency_key, body, status, _ in sent if status == 503]
                with ThreadPoolExecutor(4) as pool:
                    retries = list(
                        pool.map(lambda job: send(web.url, CURRENT, key, job[1], {"Idempotency-Key": job[0]}), refused)
                    )
                assert {retry.status for retry in retries} == {200}
                messages, deliveries, claims = counts(db)
                print(f"outage: {statuses}, {sum('Idempotent-Replayed' in r.headers for r in retries)} replayed")
                assert messages == deliveries == claims == len(sent)
        finally:
            web.stop()
            proxy.close()


Sent = list[tuple[str, dict, int, dict]]  # (Idempotency-Key, body, status, response body)


def successes(sent: Sent) -> int:
    return sum(status == 200 for _, _, status, _ in sent)


def refusals(sent: Sent) -> int:
    return sum(status == 503 for _, _, status, _ in sent)


class Traffic:
    """Four clients sending alerts with Idempotency-Keys until stopped (at most MAX_REQUESTS in all); the test waits
    on what they have seen, not on the clock."""

    def __init__(self) -> None:
        self.sent: Sent = []
        self.stop = threading.Event()
        self._seen = threading.Condition()

    def run(self, base_url: str, key: str) -> None:
        while not self.stop.is_set() and len(self.sent) < MAX_REQUESTS:
            idempotency_key = uuid.uuid4().hex
            body = {"message": "disk almost full", "alert": idempotency_key}
            answer = send(base_url, CURRENT, key, body, {"Idempotency-Key": idempotency_key})
            with self._seen:
                self.sent.append((idempotency_key, body, answer.status, answer.body))
                self._seen.notify_all()
            if answer.status == 503:
                time.sleep(0.05)  # a polite client backs off a little (pacing, not synchronisation)

    def wait_for(self, condition: Callable[[Sent], bool], timeout: float = 30) -> bool:
        """True once the answers so far meet the condition; False when the traffic ended or the time ran out."""
        with self._seen:
            self._seen.wait_for(lambda: condition(self.sent) or len(self.sent) >= MAX_REQUESTS, timeout)
            return condition(self.sent)
