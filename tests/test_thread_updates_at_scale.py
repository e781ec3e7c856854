"""The console's poll (/conversation/updates/?since=) after a burst reads a page of the thread, not the burst: the
thread's index holds its exact order (conversation, created_at, id), so the newest PAGE_SIZE since the poll are read
backwards from the index and the read stops there, whatever the planner guesses about how many rows match (here it
is told not to sort a few rows at a time, the plan it may pick when it guesses few). PostgreSQL only: its plans."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.services import conversation_of

pytestmark = pytest.mark.django_db

BURST = 5_000

SEED = """
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at)
SELECT 'msg_' || substr(md5('b' || g), 1, 24), %(thread)s, 'user', 'api', 'burst ' || g,
       %(start)s + make_interval(secs => g * 0.1)
FROM generate_series(1, %(burst)s) AS g
"""


def test_a_poll_after_a_burst_reads_one_page_of_it(client, user):
    if connection.vendor != "postgresql":
        pytest.skip("the plan checked is PostgreSQL's (set DATABASE_URL to a PostgreSQL server)")
    start = timezone.now() - timedelta(seconds=BURST * 0.1 + 60)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")  # the planner's statistics predate the burst, as in life
        cursor.execute(SEED, {"thread": conversation_of(user).pk, "start": start, "burst": BURST})
    client.force_login(user)

    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/conversation/updates/", {"since": start.isoformat()}).json()

    assert [m["id"] for m in answer["messages"]][-1] == _newest_id(user)
    (page,) = [q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"] and "LIMIT 100" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_incremental_sort = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + page)
        plan = cursor.fetchone()[0][0]["Plan"]
    scan = _node(plan, "conversations_message")
    assert scan["Index Name"] == "message_thread_order" and scan["Scan Direction"] == "Backward"
    assert scan["Actual Rows"] <= 101  # a page (and the one past it), not the burst


def _node(plan: dict, relation: str) -> dict:
    if plan.get("Relation Name") == relation:
        return plan
    for child in plan.get("Plans", []):
        found = _node(child, relation)
        if found:
            return found
    return {}


def _newest_id(user) -> str:
    return user.conversation.messages.order_by("-created_at", "-id").values_list("public_id", flat=True)[0]
