"""GET /api/v1/inbound/messages: what a key sent, newest first, a page at a time (docs/reference/api.md)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from keys.models import Generation
from keys.scopes import Scope
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db

LIST = "/api/v1/inbound/messages"


def listed(client, key: str, **query: str):
    return client.get(LIST, query, headers={"Authorization": f"Bearer {key}"})


def sent(client, key: str, count: int, path: str = CURRENT) -> list[str]:
    return [post(client, path, key, {"message": f"note {number}"}).json()["id"] for number in range(count)]


def test_the_list_is_what_the_key_sent_newest_first_in_pages(client, user):
    _, key = make_key(user, "backups")
    _, other = make_key(user, "other script")
    ids = sent(client, key, 5)
    sent(client, other, 2)  # the same account's other key: not in this key's list

    first = listed(client, key, limit="2").json()
    second = listed(client, key, limit="2", cursor=first["next_cursor"]).json()
    last = listed(client, key, limit="2", cursor=second["next_cursor"]).json()

    assert [m["id"] for m in first["messages"]] == ids[:-3:-1]
    assert [m["id"] for m in second["messages"]] == [ids[2], ids[1]]
    assert [m["id"] for m in last["messages"]] == [ids[0]]
    assert last["next_cursor"] is None
    assert {m["status"] for m in first["messages"]} == {"queued"}
    assert "reply" not in first["messages"][0]  # the key may not read replies


def test_replies_are_listed_only_for_a_key_that_reads_them(client, send, user):
    _, reader = make_key(user, "reads replies", may_read_replies=True)
    send(reader, {"message": "Remind me to call Sam"})

    (entry,) = listed(client, reader).json()["messages"]

    assert entry["status"] == "delivered"
    assert entry["reply"]["text"]
    assert entry["actions"] == []


def test_a_legacy_key_lists_its_own_messages(client, user):
    _, old = make_key(user, "old shortcut", Generation.V1)
    ids = sent(client, old, 2, LEGACY)

    assert [m["id"] for m in listed(client, old).json()["messages"]] == ids[::-1]


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"limit": "²"},  # a digit to str.isdigit(), not to int()
        {"limit": "１０"},  # fullwidth digits
        {"cursor": "msg_000000000000000000000000"},
        {"cursor": "x\x00"},
    ],
)
def test_a_bad_limit_or_cursor_is_a_clear_error(client, v2, query):
    response = listed(client, v2[1], **query)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_parameter"


def test_another_keys_cursor_is_refused(client, user):
    _, key = make_key(user, "one")
    _, other = make_key(user, "two")
    (foreign,) = sent(client, other, 1)

    assert listed(client, key, cursor=foreign).json()["code"] == "invalid_parameter"


def test_listing_needs_the_receipts_scope(client, user):
    _, sender_only = make_key(user, "sender", scopes=[Scope.MESSAGES_SEND])

    response = listed(client, sender_only)

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_a_page_costs_the_same_queries_however_long_the_list(client, user):
    _, key = make_key(user, "reads replies", may_read_replies=True)
    sent(client, key, 3)
    first = listed(client, key, limit="1").json()

    with CaptureQueriesContext(connection) as few:
        listed(client, key, limit="1", cursor=first["next_cursor"])
    sent(client, key, 30)
    with CaptureQueriesContext(connection) as many:
        listed(client, key, limit="25", cursor=first["next_cursor"])

    assert len(many) == len(few)


# Two keys' messages (one in a hundred the busy key's), each with its delivery, written by PostgreSQL itself, then
# the statistics the planner reads.
SEED = """
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at, api_key_id)
SELECT 'msg_' || substr(md5('list' || g), 1, 24), %(thread)s, 'user', 'api', 'note ' || g, now(),
       CASE WHEN g %% 100 = 0 THEN %(key)s ELSE %(other)s END
FROM generate_series(1, %(rows)s) AS g;
INSERT INTO conversations_delivery (message_id, conversation_id, api_key_id, endpoint, status, attempts, takeovers,
                                    last_error, request_id, backend, callback_id, created_at, updated_at)
SELECT id, conversation_id, api_key_id, 'api_message', 'delivered', 1, 0, '', '', 'local', '', created_at, created_at
FROM conversations_message;
ANALYZE conversations_message;
ANALYZE conversations_delivery;
"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan of PostgreSQL's planner")
def test_the_page_query_reads_the_key_newest_first_index(client, user):
    """At a key's many-thousandth message a page must not sort the key's messages: the (api_key, -id) index serves
    it. The table is filled here and analyzed, so the plan does not rest on what earlier tests left in the
    planner's statistics."""
    from conversations.services import conversation_of
    from ingestion.listing import page

    key, _ = make_key(user, "busy")
    other, _ = make_key(user, "other")
    values = {"thread": conversation_of(user).pk, "key": key.pk, "other": other.pk, "rows": 20_000}
    with connection.cursor() as cursor:
        for statement in SEED.split(";")[:-1]:  # one at a time: a server-bound statement is one command
            cursor.execute(statement, values)
    with CaptureQueriesContext(connection) as queries:
        assert len(page(key, None, 20)["messages"]) == 20
    (sql,) = [q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "delivery_by_key_newest_first" in plan, plan
    assert "Sort" not in plan, plan
