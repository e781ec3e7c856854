"""The admin's lists and pages of the tables that only grow stay flat with their size (ops/admin_lists.py): at 100k
rows each, every list and change page takes at most ten queries, and no query of theirs reads a large table from end
to end (its plan has no sequential scan of one). PostgreSQL only: its planner is the one production uses, and its
generate_series writes the rows in a few seconds."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations.services import conversation_of
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db

ROWS = 100_000
MOST_QUERIES = 10
LARGE_TABLES = [
    "conversations_message",
    "conversations_delivery",
    "channels_outboundmessage",
    "assistant_action",
    "accounts_auditevent",
    "ingestion_triggerfiring",
]

# ROWS messages over two threads (the person's has one in a hundred, sent with their key), each with its delivery
# (one in a hundred failed), a text (one in a hundred failed), a tool call, an audit line and a trigger's log line
# (one in a hundred the person's); written by PostgreSQL itself.
SEED = """
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, is_active,
                       date_joined)
SELECT '', false, 'someone' || g, '', '', 'someone' || g || '@example.com', false, true, now()
FROM generate_series(1, 1000) AS g;
INSERT INTO conversations_message (public_id, conversation_id, role, source, text, created_at, api_key_id)
SELECT 'msg_' || substr(md5('m' || g), 1, 24), CASE WHEN g %% 100 = 0 THEN %(thread)s ELSE %(other_thread)s END,
       'user', 'api', 'message ' || g, now() - make_interval(secs => %(rows)s - g),
       CASE WHEN g %% 100 = 0 THEN %(key)s END
FROM generate_series(1, %(rows)s) AS g;
INSERT INTO conversations_delivery (message_id, conversation_id, api_key_id, endpoint, status, attempts, takeovers,
                                    last_error, request_id, backend, callback_id, created_at, updated_at)
SELECT id, conversation_id, api_key_id, 'api_message', CASE WHEN id %% 100 = 0 THEN 'failed' ELSE 'delivered' END,
       1, 0, '', '', 'local', '', created_at, created_at
FROM conversations_message;
INSERT INTO channels_outboundmessage (message_id, person_id, part, parts, channel, address, text, status, attempts,
    takeovers, last_error, held_reason, waiting_for_quiet_hours, as_template, provider_message_id, provider_status,
    provider_error, created_at, updated_at)
SELECT id, %(person)s, 1, 1, 'sms', '+15005550006', text, CASE WHEN id %% 100 = 0 THEN 'failed' ELSE 'sent' END,
       1, 0, '', '', false, false, 'SM' || id, 'delivered', '', created_at, created_at
FROM conversations_message;
INSERT INTO assistant_action (delivery_id, attempt, round, tool_call_id, kind, tool, connection_name, arguments,
    result, is_error, started_at, follow_ups, call_index, state, requested_by, read_outside, approval_code)
SELECT id, 1, 1, '', 'builtin', 'create_reminder', '', '{}', 'ok', false, created_at, 0, 0, 'done', '', false, ''
FROM conversations_delivery;
INSERT INTO accounts_auditevent (account_id, at, kind, summary, actor)
SELECT CASE WHEN g %% 100 = 0 THEN %(person)s ELSE %(other)s END, now() - make_interval(secs => g), 'key_created',
       'Created key ' || g, 'person'
FROM generate_series(1, %(rows)s) AS g;
INSERT INTO ingestion_triggerfiring (trigger_id, outcome, code, summary, count, at, last_at, message_id)
SELECT CASE WHEN id %% 100 = 0 THEN %(trigger)s ELSE %(other_trigger)s END, 'accepted', '', 'push to main', 1,
       created_at, created_at, id
FROM conversations_message;
ANALYZE;
"""


@pytest.fixture
def staff_client(client):
    client.force_login(get_user_model().objects.create_superuser("staff", "staff@example.com", "pw"))
    return client


@pytest.fixture
def history(user):
    if connection.vendor != "postgresql":
        pytest.skip("the plans checked are PostgreSQL's (set DATABASE_URL to a PostgreSQL server)")
    from triggers.services import create_trigger

    other = UserFactory()
    key, _ = make_key(user)
    trigger = create_trigger(user, "a push", "say so")[0]
    conversation = conversation_of(user)
    values = {
        "rows": ROWS, "person": user.pk, "thread": conversation.pk, "key": key.pk, "trigger": trigger.pk,
        "other": other.pk, "other_thread": conversation_of(other).pk,
        "other_trigger": create_trigger(other, "a push", "say so")[0].pk,
    }  # fmt: skip
    with connection.cursor() as cursor:
        for statement in SEED.split(";")[:-1]:  # one at a time: a server-bound statement is one command
            cursor.execute(statement, values)
        cursor.execute("SELECT max(id) FROM conversations_message")
        middle = cursor.fetchone()[0] - ROWS // 2
    return {"user": user, "key": key, "trigger": trigger, "conversation": conversation, "middle": middle}


def pages(history: dict) -> list[str]:
    from assistant.models import Action
    from conversations.models import Delivery, Message

    middle = Message.objects.get(pk=history["middle"])
    delivery = Delivery.objects.get(message=middle)
    action = Action.objects.get(delivery=delivery)
    email = history["user"].email
    return [
        "/admin/conversations/message/",
        "/admin/conversations/message/?p=3",
        f"/admin/conversations/message/?conversation__id__exact={history['conversation'].pk}",
        f"/admin/conversations/message/?q={middle.public_id}",
        f"/admin/conversations/message/?q={email}",
        f"/admin/conversations/message/{middle.pk}/change/",
        f"/admin/conversations/conversation/{history['conversation'].pk}/change/",
        "/admin/conversations/delivery/",
        "/admin/conversations/delivery/?status__exact=failed",
        f"/admin/conversations/delivery/?api_key={history['key'].pk}",
        f"/admin/conversations/delivery/?q={middle.public_id}",
        f"/admin/conversations/delivery/{delivery.pk}/change/",
        "/admin/channels/outboundmessage/",
        "/admin/channels/outboundmessage/?status__exact=failed",
        f"/admin/channels/outboundmessage/?q=SM{middle.pk}",
        f"/admin/channels/outboundmessage/{middle.outbound.get().pk}/change/",
        "/admin/assistant/action/",
        f"/admin/assistant/action/{action.pk}/change/",
        "/admin/accounts/auditevent/",
        f"/admin/accounts/auditevent/?q={email}",
        f"/admin/accounts/auditevent/{history['user'].audit_events.order_by('id')[ROWS // 200].pk}/change/",
        "/admin/ingestion/triggerfiring/",
        f"/admin/ingestion/triggerfiring/?trigger__id__exact={history['trigger'].pk}",
        f"/admin/ingestion/triggerfiring/?q={email}",
    ]


def scans_of_large_tables(sql: str) -> list[str]:
    """The plan's lines that read a large table from end to end."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = [row[0] for row in cursor.fetchall()]
    return [line.strip() for line in plan if "Seq Scan on" in line and any(t in line for t in LARGE_TABLES)]


def test_every_list_and_page_of_a_large_table_is_a_few_indexed_queries(staff_client, history):
    problems = []
    for page in pages(history):
        with CaptureQueriesContext(connection) as queries:
            response = staff_client.get(page)
        if response.status_code != 200:
            problems.append(f"{page}: HTTP {response.status_code}")
        if len(queries) > MOST_QUERIES:
            problems.append(f"{page}: {len(queries)} queries")
        for query in queries.captured_queries:
            if query["sql"].lstrip().upper().startswith("SELECT"):
                problems += [f"{page}: {scan} in {query['sql']}" for scan in scans_of_large_tables(query["sql"])]
    assert problems == []


def test_a_large_list_shows_an_estimate_and_its_newest_rows_first(staff_client, history):
    from conversations.models import Message

    changelist = staff_client.get("/admin/conversations/delivery/").context["cl"]

    assert changelist.full_result_count is None  # never counted whole
    assert changelist.result_count >= ROWS * 0.9  # PostgreSQL's estimate, after ANALYZE
    newest = Message.objects.order_by("-id").first()
    assert changelist.result_list[0].message_id == newest.pk
