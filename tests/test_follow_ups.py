"""Follow-ups from long-running tools: the official `poke.mcp.with_callbacks` helper inside a real FastMCP server
posts them to POST /api/v1/mcp/callback; they land in the thread and the assistant goes on."""

import time

import pytest

from assistant.models import Action
from assistant.tools.mcp import new_token_for
from connections import services as connections
from conversations.models import Delivery, Message, Role, Source
from tests.conftest import post
from tests.mcp_server import running_mcp_server
from tests.test_assistant_tools import call, completion

CALLBACK = "/api/v1/mcp/callback"


def wait_for(condition, seconds: float = 20) -> None:
    """Poll the database between the live server's requests: on SQLite they share the test's one connection, and a
    read while a request writes is "database table is locked" (tests/conftest.py serves one request at a time)."""
    from tests.conftest import _OneRequestAtATime

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with _OneRequestAtATime._serving:
            if condition():
                return
        time.sleep(0.05)
    raise AssertionError("the condition did not come true in time")


@pytest.mark.django_db(transaction=True)
def test_with_callbacks_follow_ups_reach_the_thread_and_the_assistant_continues(send, llm, v2, live_server, settings):
    settings.PUBLIC_BASE_URL = live_server.url
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 0
    llm.answer(200, completion(tool_calls=[call("reports__build_report", {"topic": "sales"})]))
    llm.answer(200, completion("I started the sales report."))
    llm.answer(200, completion("Part 1 is in."))
    llm.answer(200, completion("The report is complete."))
    with running_mcp_server(follow_ups=2) as server:
        connections.add_connection(v2[0].owner, "Reports", server.url)
        send(v2[1], {"message": "Build the sales report"})
        assert Delivery.objects.get().reply.text == "I started the sales report."
        server.release.set()  # the tool goes on with its later parts

        wait_for(lambda: Message.objects.filter(role=Role.ASSISTANT).count() == 3)

    follow_ups = list(Message.objects.filter(role=Role.TOOL).order_by("created_at", "pk"))
    assert [m.text for m in follow_ups] == ["Part 1 of the sales report.", "Part 2 of the sales report."]
    assert all(m.source == Source.TOOL_FOLLOW_UP for m in follow_ups)
    assert [m.context["hasMore"] for m in follow_ups] == [True, False]
    assert follow_ups[0].context["tool"] == "Reports · build_report"
    assert Action.objects.get().follow_ups == 2
    last_request = llm.received[-1].json()["messages"][-1]
    assert last_request["role"] == "user"
    assert "A follow-up from the tool Reports · build_report" in last_request["content"]
    assert "Part 2 of the sales report." in last_request["content"]
    replies = Message.objects.filter(role=Role.ASSISTANT).order_by("created_at", "pk").values_list("text", flat=True)
    assert list(replies)[-1] == "The report is complete."


@pytest.fixture
def action(v2, db):
    from connections.models import Connection
    from conversations.models import Endpoint
    from ingestion.hotpath.recording import record_user_message

    owner = v2[0].owner
    message = record_user_message(user=owner, endpoint=Endpoint.CURRENT, text="build it", api_key=v2[0])
    connection = Connection.objects.create(owner=owner, name="Reports", server_url="https://mcp.example.com/mcp")
    return Action.objects.create(
        delivery=message.delivery, kind="mcp", tool="build_report", connection=connection, connection_name="Reports"
    )


def follow_up(client, token, body):
    return post(client, CALLBACK, token, body)


@pytest.mark.django_db
def test_each_token_works_once_and_the_answer_carries_the_next(client, action, settings):
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 0
    token = new_token_for(action)
    first = follow_up(client, token, {"content": "part 1", "hasMore": True})

    assert first.status_code == 200
    assert first.json()["nextToken"].startswith("pfu_")
    again = follow_up(client, token, {"content": "part 1 again", "hasMore": True})
    assert (again.status_code, again.json()["code"]) == (401, "invalid_follow_up_token")
    last = follow_up(client, first.json()["nextToken"], {"content": "done", "hasMore": False})
    assert last.status_code == 200 and last.json()["nextToken"] is None
    assert Message.objects.filter(role=Role.TOOL).count() == 2


@pytest.mark.django_db
def test_a_follow_up_after_the_limit_has_no_token_to_come_with(client, action, settings):
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 0
    settings.MCP_FOLLOW_UP_LIMIT = 2
    token = new_token_for(action)
    for number in range(2):
        answer = follow_up(client, token, {"content": f"part {number}", "hasMore": True}).json()
        previous, token = token, answer["nextToken"]
    assert token is None  # the limit: no next token, though the tool said it has more
    refused = follow_up(client, previous, {"content": "part 3", "hasMore": True})
    assert refused.status_code == 401
    assert Message.objects.filter(role=Role.TOOL).count() == 2


@pytest.mark.django_db
def test_too_frequent_follow_ups_are_429_with_retry_after_ms_and_the_token_stays_valid(client, action, settings):
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 60
    second_token = follow_up(client, new_token_for(action), {"content": "part 1", "hasMore": True}).json()["nextToken"]

    too_soon = follow_up(client, second_token, {"content": "part 2", "hasMore": True})

    assert too_soon.status_code == 429
    assert too_soon.json()["code"] == "rate_limited"
    assert 59_000 < too_soon.json()["retryAfterMs"] <= 60_000
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 0
    assert follow_up(client, second_token, {"content": "part 2", "hasMore": False}).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "token", [None, "pfu_" + "x" * 43, "psk_not_a_follow_up_token", "pfu_" + "x" * 200, "Bearer", "pfu_\u00e9"]
)
def test_wrong_tokens_are_401(client, action, token):
    response = follow_up(client, token, {"content": "x"})
    assert response.status_code == 401
    assert not Message.objects.filter(role=Role.TOOL).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{}, {"content": ""}, {"content": "  "}, {"content": 5}, {"content": "x", "hasMore": "yes"}, ["x"]]
)
def test_bad_bodies_are_400_and_spend_nothing(client, action, body):
    token = new_token_for(action)
    response = follow_up(client, token, body)
    assert response.status_code == 400
    assert follow_up(client, token, {"content": "fine"}).status_code == 200


@pytest.mark.django_db
def test_an_expired_token_is_401(client, action):
    from datetime import timedelta

    from django.utils import timezone

    from assistant.models import FollowUpToken

    token = new_token_for(action)
    FollowUpToken.objects.update(created_at=timezone.now() - timedelta(hours=25))
    assert follow_up(client, token, {"content": "late"}).status_code == 401


@pytest.mark.django_db
def test_wrong_tokens_count_against_the_address_like_wrong_keys(client, action, settings):
    settings.AUTH_FAILURE_RATE_LIMIT = "3/m"
    for _ in range(3):
        assert follow_up(client, "pfu_" + "x" * 43, {"content": "x"}).status_code == 401
    assert follow_up(client, "pfu_" + "y" * 43, {"content": "x"}).status_code == 429


def _remove_connection(action):
    connections.remove_connection(action.connection)


def _revoke_key(action):
    from keys.services import revoke_key

    revoke_key(action.delivery.message.api_key)


def _expire_key(action):
    from datetime import timedelta

    from django.utils import timezone

    from keys.models import ApiKey

    ApiKey.objects.filter(pk=action.delivery.message.api_key_id).update(expires_at=timezone.now() - timedelta(1))


def _deactivate_account(action):
    owner = action.delivery.message.conversation.user
    owner.is_active = False
    owner.save(update_fields=["is_active"])


@pytest.mark.django_db
@pytest.mark.parametrize("end", [_remove_connection, _revoke_key, _expire_key, _deactivate_account])
def test_a_token_dies_with_the_connection_the_key_or_the_account(client, action, settings, end):
    """A follow-up token outlived what it was handed out under: 200, a nextToken, and the text went to the
    assistant. The tool's access ends with the connection, the key that sent the message or the account."""
    settings.MCP_FOLLOW_UP_INTERVAL_SECONDS = 0
    token = new_token_for(action)
    end(action)

    refused = follow_up(client, token, {"content": "part 1", "hasMore": True})

    assert (refused.status_code, refused.json()["code"]) == (401, "invalid_follow_up_token")
    assert "nextToken" not in refused.json()
    assert not Message.objects.filter(role=Role.TOOL).exists()
    assert Delivery.objects.count() == 1  # only the message that called the tool
