"""The history benchmark's builder (bench/history_build.py) writes what it says, at a small scale: the rows of each
table in their stated proportions, over the stated days, the measured person's share, and every index and constraint
it set aside made again. PostgreSQL only: the builder is PostgreSQL's SQL (generate_series, md5, interval)."""

import pytest
from django.db import connection

from bench import history_build
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db

MESSAGES = 2_000  # 1,000 pairs
BURST = 30
QUEUED = 20


def schema() -> set[tuple[str, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indrelid::regclass::text = ANY(%s)",
            [history_build.TABLES],
        )
        indexes = set(cursor.fetchall())
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid::regclass::text = ANY(%s)",
            [history_build.TABLES],
        )
        return indexes | set(cursor.fetchall())


def count(sql: str, values: list | None = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, values or [])
        return cursor.fetchone()[0]


@pytest.fixture
def built():
    if connection.vendor != "postgresql":
        pytest.skip("the builder writes with PostgreSQL's SQL (set DATABASE_URL to a PostgreSQL server)")
    person = UserFactory()
    make_key(person)
    before = schema()
    connection.ensure_connection()
    history = history_build.build(
        connection.connection, person.pk, messages=MESSAGES, people=10, days=400, burst=BURST, queued=QUEUED
    )
    return {"history": history, "schema before": before, "person": person}


def test_the_builder_writes_each_table_in_its_stated_proportions(built):
    rows = built["history"]["rows"]

    assert rows["conversations_message"] == MESSAGES + BURST
    assert rows["conversations_delivery"] == MESSAGES // 2 + BURST  # one per person's message
    assert count("SELECT count(*) FROM conversations_delivery WHERE status = 'queued'") == QUEUED
    assert rows["channels_outboundmessage"] == MESSAGES // 2 // 5  # a reply in five
    assert rows["assistant_action"] == pytest.approx(rows["conversations_delivery"] / 5, abs=1)
    assert count("SELECT count(*) FROM accounts_auditevent WHERE kind = 'key_used'") == MESSAGES // 10
    assert rows["ingestion_triggerfiring"] == rows["triggers_receiveddelivery"] == MESSAGES // 2 // 20
    assert rows["ingestion_idempotencyrecord"] == MESSAGES // 2 // 10  # a pair in ten
    assert count("SELECT count(*) FROM conversations_delivery WHERE status = 'failed'") == MESSAGES // 2 // 100


def test_the_history_spans_its_days_and_the_person_has_their_share_and_the_burst(built):
    values = built["history"]["values"]
    span = count("SELECT extract(day FROM max(created_at) - min(created_at))::int FROM conversations_message")
    theirs = count("SELECT count(*) FROM conversations_message WHERE conversation_id = %s", [values["conversation"]])

    assert 399 <= span <= 400
    assert theirs == MESSAGES // history_build.KEY_EVERY + BURST
    recent = "SELECT count(*) FROM conversations_message WHERE created_at > now() - interval '10 minutes'"
    assert count(recent) == BURST


def test_every_index_and_constraint_set_aside_is_made_again(built):
    assert schema() == built["schema before"]
