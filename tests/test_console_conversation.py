"""The conversation page: the thread, typing a message, and the JSON view the page polls for new messages."""

import json
import re

import pytest
from django.test import Client

from conversations.models import Delivery, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from ingestion.hotpath.recording import record_user_message
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def assistant_reply(user, text: str) -> Message:
    return Message.objects.create(
        conversation=conversation_of(user), role=Role.ASSISTANT, source=Source.ASSISTANT, text=text
    )


def test_the_thread_shows_every_message_oldest_first_with_its_source_and_context(signed_in, user, v2, v1):
    key, _ = v2
    legacy, _ = v1
    record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="typed here")
    record_user_message(
        user=user, endpoint=Endpoint.CURRENT, text="from ci", context={"message": "from ci", "sha": "4f2c"}, api_key=key
    )
    record_user_message(user=user, endpoint=Endpoint.LEGACY, text="from sms", context={"message": "x"}, api_key=legacy)
    assistant_reply(user, "On it <b>now</b>")

    page = signed_in.get("/conversation/").content.decode()

    order = [page.index(text) for text in ("typed here", "from ci", "from sms", "On it")]
    assert order == sorted(order)
    assert "Typed in the app" in page
    assert "API via key “github actions”" in page
    assert "Legacy webhook via key “old shortcut”" in page
    assert "Assistant" in page
    assert "&quot;sha&quot;: &quot;4f2c&quot;" in page  # the context JSON, escaped, in a <details>
    assert page.count("<details") == 2
    assert "On it &lt;b&gt;now&lt;/b&gt;" in page


def test_another_users_messages_are_never_shown(signed_in, user):
    stranger = UserFactory(email="mallory@example.com")
    secret = record_user_message(user=stranger, endpoint=Endpoint.CONSOLE, text="mallory's secret plans")

    assert "mallory's secret plans" not in signed_in.get("/conversation/").content.decode()
    assert signed_in.get("/conversation/updates/").json()["messages"] == []
    assert signed_in.get(f"/conversation/messages/{secret.public_id}/").status_code == 404


def test_a_typed_message_goes_through_the_write_path_as_the_app(signed_in, user):
    response = signed_in.post("/conversation/messages/", {"text": "Book a table for two at 8"})

    message = Message.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/conversation/#{message.public_id}"
    assert (message.role, message.source, message.text) == (Role.USER, Source.APP, "Book a table for two at 8")
    assert message.conversation.user == user
    assert Delivery.objects.get(message=message).endpoint == Endpoint.CONSOLE


def test_the_page_can_send_without_leaving_it(signed_in):
    response = signed_in.post("/conversation/messages/", {"text": "hello"}, headers={"Accept": "application/json"})
    assert response.status_code == 201
    assert response.json() == {"success": True, "id": Message.objects.get().public_id}


@pytest.mark.parametrize("text", ["", "   \n "])
def test_a_blank_message_is_refused(signed_in, text):
    page = signed_in.post("/conversation/messages/", {"text": text})
    assert page.status_code == 400
    assert "Type a message first." in page.content.decode()

    api = signed_in.post("/conversation/messages/", {"text": text}, headers={"Accept": "application/json"})
    assert api.status_code == 400
    assert api.json() == {"success": False, "message": "Type a message first.", "code": "invalid_body"}
    assert not Message.objects.exists()


def test_sending_needs_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/conversation/messages/", {"text": "hi"}).status_code == 403
    assert not Message.objects.exists()


def since_of(page_html: str) -> str:
    (since,) = re.findall(r'data-since="([^"]+)"', page_html)
    return since


def poll(client, since: str) -> dict:
    response = client.get("/conversation/updates/", {"since": since})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    return response.json()


def test_updates_send_what_is_new_since_the_page_rendered_like_the_page(signed_in, user, v2):
    key, _ = v2
    seen = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="already on the page")
    since = since_of(signed_in.get("/conversation/").content.decode())
    new = record_user_message(user=user, endpoint=Endpoint.CURRENT, text="arrived later", api_key=key)
    reply = assistant_reply(user, "a reply")

    data = poll(signed_in, since)

    assert [item["id"] for item in data["messages"]] == [new.public_id, reply.public_id]
    assert data["recent"] == [seen.public_id]  # ids only: the page has it, and says so by not asking
    assert f'id="{new.public_id}"' in data["messages"][0]["html"]
    assert "API via key “github actions”" in data["messages"][0]["html"]


def test_each_poll_sends_only_what_is_new_since_the_previous_one(signed_in, user):
    """Anchored at the previous poll, not at the newest message: forty 240 KB messages are sent once, never again
    (they were re-sent on every 2 s poll for 30 s, 62 MB each time)."""
    since = since_of(signed_in.get("/conversation/").content.decode())
    big = "x" * 240_000
    for _ in range(40):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=big)

    first = signed_in.get("/conversation/updates/", {"since": since})
    second = signed_in.get("/conversation/updates/", {"since": first.json()["since"]})
    third = signed_in.get("/conversation/updates/", {"since": second.json()["since"]})

    assert len(first.json()["messages"]) == 40
    assert len(first.content) < 40 * 5_000  # each shortened (below), not 240 KB
    assert second.json()["messages"] == [] and third.json()["messages"] == []
    assert len(third.content) < 2_000  # forty ids, nothing else


def test_a_message_that_committed_after_a_poll_passed_its_time_is_fetched_by_id(signed_in, user):
    from datetime import timedelta

    from django.utils import timezone

    since = poll(signed_in, since_of(signed_in.get("/conversation/").content.decode()))["since"]
    late = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="committed late")
    # Created (its timestamp taken) before that poll, visible only now: its transaction committed afterwards.
    Message.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(seconds=5))

    data = poll(signed_in, since)
    assert data["messages"] == [] and data["recent"] == [late.public_id]

    asked = signed_in.get("/conversation/updates/", {"ids": f"{late.public_id},msg_nonsense,%00"}).json()
    assert [item["id"] for item in asked["messages"]] == [late.public_id]
    assert "committed late" in asked["messages"][0]["html"]


def test_a_message_asked_for_by_id_is_only_ever_ones_own(signed_in, user):
    stranger = UserFactory(email="mallory@example.com")
    secret = record_user_message(user=stranger, endpoint=Endpoint.CONSOLE, text="mallory's secret plans")
    assert signed_in.get("/conversation/updates/", {"ids": secret.public_id}).json() == {"messages": []}


def test_updates_of_an_empty_thread_are_empty(signed_in):
    data = poll(signed_in, since_of(signed_in.get("/conversation/").content.decode()))
    assert (data["messages"], data["recent"]) == ([], [])


@pytest.mark.parametrize(
    "since", ["", "%00", "2026-13-45T00:00:00+00:00", "2026-01-01T00:00:00", "x" * 5000, "9999-12-31T00:00:00+00:00"]
)
def test_updates_without_a_usable_since_send_the_latest_messages(signed_in, user, since):
    # A NUL in a query reaches PostgreSQL as an error (a 500) unless the value is checked first; a time without a
    # zone or in the future is no page's.
    message = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="first")
    data = signed_in.get(f"/conversation/updates/?since={since}").json()
    assert [item["id"] for item in data["messages"]] == [message.public_id]


def test_updates_need_a_login(client):
    assert client.get("/conversation/updates/?since=0").status_code == 302


def test_a_long_thread_shows_the_newest_hundred(signed_in, user):
    for n in range(105):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=f"message number {n:03d}")
    page = signed_in.get("/conversation/").content.decode()
    assert "message number 104" in page and "message number 005" in page
    assert "message number 004" not in page
    # No count: it went stale as the page's poll added messages ("latest 2 of 3" with 5 shown), and counting the
    # whole thread on every view cost a scan of it.
    assert "Showing your latest messages" in page and " of 105" not in page


def test_a_short_thread_says_nothing_about_earlier_messages(signed_in, user):
    for n in range(3):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=f"message number {n:03d}")
    page = signed_in.get("/conversation/").content.decode()
    assert "Showing your latest messages" not in page and "data-earlier" not in page


def test_earlier_messages_are_a_link_away_page_by_page(signed_in, user):
    for n in range(250):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=f"message number {n:03d}")
    by_text = dict(Message.objects.values_list("text", "public_id"))

    latest = signed_in.get("/conversation/").content.decode()
    assert "message number 150" in latest and "message number 149" not in latest
    assert f'href="/conversation/?before={by_text["message number 150"]}"' in latest
    assert "data-updates-url" in latest and 'name="text"' in latest  # live, with the composer

    earlier = signed_in.get(f"/conversation/?before={by_text['message number 150']}").content.decode()
    shown = re.findall(r"message number (\d{3})", earlier)
    assert shown == [f"{n:03d}" for n in range(50, 150)]  # the hundred before, oldest first
    assert f'href="/conversation/?before={by_text["message number 050"]}"' in earlier
    assert "Back to the latest" in earlier
    assert "data-updates-url" not in earlier and 'name="text"' not in earlier  # a page of the past: read only

    first = signed_in.get(f"/conversation/?before={by_text['message number 050']}").content.decode()
    assert re.findall(r"message number (\d{3})", first) == [f"{n:03d}" for n in range(50)]
    assert "data-earlier" not in first  # nothing before the first message


@pytest.mark.parametrize("before", ["msg_notavalidone", "'; DROP TABLE x;--", "msg_" + "A" * 24])
def test_an_anchor_that_is_not_a_message_of_the_thread_shows_the_latest(signed_in, user, before):
    other = UserFactory()
    foreign = record_user_message(user=other, endpoint=Endpoint.CONSOLE, text="someone else's")
    record_user_message(user=user, endpoint=Endpoint.CONSOLE, text="mine")
    for anchor in (before, foreign.public_id):
        page = signed_in.get("/conversation/", {"before": anchor})
        assert page.status_code == 200
        assert "mine" in page.content.decode() and "data-updates-url" in page.content.decode()
        assert "someone else's" not in page.content.decode()


def test_context_json_keeps_non_ascii_readable(signed_in, user, v2):
    key, _ = v2
    record_user_message(user=user, endpoint=Endpoint.CURRENT, text="x", context={"city": "Zürich"}, api_key=key)
    page = signed_in.get("/conversation/").content.decode()
    assert json.dumps({"city": "Zürich"}, ensure_ascii=False)[1:-1].replace('"', "&quot;") in page


def test_an_earlier_page_is_read_with_one_row_comparison_the_index_bounds(signed_in, user):
    """(created_at, id) < (X, Y): the (conversation, created_at) index stops at the anchor; the OR form it replaced
    read the thread's whole past and filtered it (90,000 rows removed by filter at 100k messages)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for n in range(3):
        record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=f"message number {n:03d}")
    newest = Message.objects.order_by("-created_at", "-id").first()
    with CaptureQueriesContext(connection) as queries:
        assert signed_in.get(f"/conversation/?before={newest.public_id}").status_code == 200
    earlier = [q["sql"] for q in queries if '"conversations_message"."id") <' in q["sql"]]
    assert len(earlier) == 1, [q["sql"] for q in queries]
    assert " OR " not in earlier[0]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            cursor.execute(f"EXPLAIN {earlier[0]}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("RESET enable_seqscan")
        assert "Index Cond" in plan and "created_at" in plan.split("Index Cond:", 1)[1], plan
