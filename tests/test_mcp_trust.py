"""Read-only is the person's call, not the server's (assistant/approval/rule.py, Effect): an MCP tool's readOnlyHint
is shown in the console as the server's claim; for an API key's or a trigger's message it is believed only when the
person marked the server trusted; a tool they mark as acting waits wherever a tool that acts would, and the mark
outlives a sync. A real FastMCP server on 127.0.0.1 (its ``add`` tool says readOnlyHint)."""

import pytest

from accounts.models import AuditEvent, AuditKind
from assistant.models import Action, ActionState
from connections import services as connections
from connections.models import Connection
from keys.models import ApiKey, ToolAccess
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.mcp_server import running_mcp_server
from tests.test_approvals import box_for
from tests.test_tool_ledger import call

pytestmark = pytest.mark.django_db

ADD = "tracker__add"


@pytest.fixture
def owner():
    return UserFactory(email="ada@example.com")


@pytest.fixture
def tracker(owner):
    with running_mcp_server() as server:
        connection = connections.add_connection(owner, "Tracker", server.url)
        yield connection, server


def keys_call(owner, **policy) -> tuple[str, Action]:
    key, _ = make_key(owner, "ci", tools_need_approval=True)
    if policy:
        ApiKey.objects.filter(pk=key.pk).update(**policy)
        key.refresh_from_db()
    told = call(box_for(delivery_under_way(owner, key=key)), ADD, {"a": 2, "b": 3})
    return told, Action.objects.latest("pk")


def test_an_untrusted_servers_read_only_claim_waits_for_a_keys_message(owner, tracker):
    _, server = tracker
    told, action = keys_call(owner)
    assert action.state == ActionState.AWAITING_APPROVAL and "must approve it first" in told
    assert server.calls == []  # the tool that says it only reads was not called


def test_a_trusted_servers_read_only_claim_runs_for_a_keys_message(owner, tracker):
    connection, server = tracker
    connections.set_trusted(connection, True)
    told, action = keys_call(owner)
    assert (action.state, told) == (ActionState.DONE, "5")
    assert server.calls == [("add", {"a": 2, "b": 3})]


def test_a_tool_the_person_marks_as_acting_waits_even_on_a_trusted_server_and_the_mark_outlives_a_sync(owner, tracker):
    connection, server = tracker
    connections.set_trusted(connection, True)
    assert connections.mark_acting(connection, "add", True)
    connections.sync_tools(Connection.objects.get(pk=connection.pk))  # the server lists its tools again
    _, action = keys_call(owner)
    assert action.state == ActionState.AWAITING_APPROVAL and server.calls == []


def test_the_persons_own_words_believe_the_claim(owner, tracker):
    _, server = tracker
    call(box_for(delivery_under_way(owner)), ADD, {"a": 1, "b": 1})
    assert Action.objects.get().state == ActionState.DONE and server.calls == [("add", {"a": 1, "b": 1})]


def test_a_read_only_key_is_offered_an_untrusted_servers_tools_only_once_the_person_trusts_it(owner, tracker):
    connection, _ = tracker
    key, _ = make_key(owner, "reader")
    ApiKey.objects.filter(pk=key.pk).update(tool_access=ToolAccess.READ_ONLY)
    key.refresh_from_db()
    assert ADD not in box_for(delivery_under_way(owner, key=key)).tools
    connections.set_trusted(connection, True)
    assert ADD in box_for(delivery_under_way(owner, key=key)).tools


def test_the_console_shows_the_claim_as_the_servers_and_lets_the_person_decide(client, owner, tracker):
    connection, _ = tracker
    client.force_login(owner)
    page = client.get("/connections/").content.decode()
    assert "the server says it only reads" in page and "Not trusted" in page

    client.post(f"/connections/{connection.public_id}/mark-tool/", {"tool": "add", "acting": "1"})
    assert Connection.objects.get(pk=connection.pk).acting_tools == ["add"]
    assert "acts (your mark)" in client.get("/connections/").content.decode()
    client.post(f"/connections/{connection.public_id}/mark-tool/", {"tool": "add", "acting": "0"})
    assert Connection.objects.get(pk=connection.pk).acting_tools == []

    client.post(f"/connections/{connection.public_id}/trust/", {"trusted": "1"})
    assert Connection.objects.get(pk=connection.pk).trusted
    client.post(f"/connections/{connection.public_id}/trust/", {"trusted": "0"})
    assert not Connection.objects.get(pk=connection.pk).trusted
    logged = AuditEvent.objects.filter(kind=AuditKind.CONNECTION_TRUST_CHANGED).order_by("at", "id")
    assert [(event.summary, event.actor) for event in logged] == [
        ("MCP server “Tracker”: add treated as acting, whatever the server says", "you, in the console"),
        ("MCP server “Tracker”: add as the server describes it again", "you, in the console"),
        ("MCP server “Tracker” trusted: its tools' read-only claims are believed", "you, in the console"),
        ("MCP server “Tracker” no longer trusted", "you, in the console"),
    ]


def test_another_persons_connection_cannot_be_trusted_or_marked(client, owner, tracker):
    connection, _ = tracker
    client.force_login(UserFactory(email="mallory@example.com"))
    assert client.post(f"/connections/{connection.public_id}/trust/", {"trusted": "1"}).status_code == 404
    assert (
        client.post(f"/connections/{connection.public_id}/mark-tool/", {"tool": "add", "acting": "1"}).status_code
        == 404
    )
    assert not Connection.objects.get(pk=connection.pk).trusted


def test_a_tool_the_server_does_not_list_cannot_be_marked(client, owner, tracker):
    connection, _ = tracker
    client.force_login(owner)
    page = client.post(
        f"/connections/{connection.public_id}/mark-tool/", {"tool": "nope", "acting": "1"}, follow=True
    ).content.decode()
    assert "has no tool named" in page and Connection.objects.get(pk=connection.pk).acting_tools == []
