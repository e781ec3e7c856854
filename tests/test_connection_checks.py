"""Checks of a server while a person waits (adding or syncing an MCP connection) are bounded (issue 26 item 5):
at most MCP_CHECKS_PER_ACCOUNT per account and MCP_CHECKS_PER_PROCESS per web process at once, refused at once
beyond that (429 / 503 with Retry-After), each within MCP_CHECK_TIMEOUT_SECONDS."""

import threading

import pytest

from connections.checks import ChecksBusy, check_slot
from connections.models import Connection
from tests.conftest import post
from tests.factories import UserFactory
from tests.mcp_raw_server import running_raw_mcp_server, tool
from tests.mcp_server import running_mcp_server

pytestmark = pytest.mark.django_db

ADD = "/api/v1/mcp/connections/cli"


@pytest.fixture
def limits(settings):
    settings.MCP_CHECKS_PER_ACCOUNT = 1
    settings.MCP_CHECKS_PER_PROCESS = 2


def test_a_second_check_for_the_same_account_is_429_at_once(client, v2, limits):
    with running_mcp_server() as server, check_slot(v2[0].owner_id):
        response = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": server.url})

    assert response.status_code == 429, response.content
    assert response.json()["code"] == "too_many_connection_checks"
    assert int(response["Retry-After"]) >= 1
    assert "still running" in response.json()["message"]
    assert not server.requests  # refused before connecting
    assert not Connection.objects.exists()


def test_a_busy_process_is_503_for_every_account(client, v2, limits):
    others = [UserFactory(email=f"other{n}@example.com") for n in range(2)]
    with running_mcp_server() as server, check_slot(others[0].pk), check_slot(others[1].pk):
        response = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": server.url})

    assert response.status_code == 503, response.content
    assert response.json()["code"] == "connection_checks_busy"
    assert int(response["Retry-After"]) >= 1
    assert not server.requests


def test_a_slot_is_given_back_when_its_check_ends(client, v2, limits):
    with running_mcp_server() as server:
        first = post(client, ADD, v2[1], {"name": "One", "serverUrl": server.url})
        second = post(client, ADD, v2[1], {"name": "Two", "serverUrl": server.url.replace("/mcp", "/nope")})
        third = post(client, ADD, v2[1], {"name": "Three", "serverUrl": server.url})

    assert [first.status_code, second.status_code, third.status_code] == [201, 422, 201]


def test_sync_tools_takes_a_slot_too(client, v2, limits):
    with running_mcp_server() as server:
        connection_id = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": server.url}).json()["id"]
        with check_slot(v2[0].owner_id):
            response = post(client, f"/api/v1/mcp/connections/{connection_id}/sync-tools", v2[1], {})

    assert (response.status_code, response.json()["code"]) == (429, "too_many_connection_checks")


def test_a_check_that_hangs_ends_at_the_check_deadline(client, v2, settings):
    """The request waits MCP_CHECK_TIMEOUT_SECONDS at most, not the tool calls' longer MCP_TIMEOUT_SECONDS."""
    settings.MCP_TIMEOUT_SECONDS = 30
    settings.MCP_CHECK_TIMEOUT_SECONDS = 0.5
    with running_raw_mcp_server(lambda cursor: {"tools": [tool("late")]}) as server:
        server.hang = True  # tools/list answers after 10 s
        response = post(client, ADD, v2[1], {"name": "Slow", "serverUrl": server.url})

    assert response.status_code == 422, response.content
    assert "did not answer in time" in response.json()["message"]


def test_the_console_add_form_is_bounded_too(client, user, limits):
    client.force_login(user)
    with running_mcp_server() as server, check_slot(user.pk):
        page = client.post("/connections/", {"name": "Tracker", "server_url": server.url})

    assert page.status_code == 429
    assert int(page["Retry-After"]) >= 1
    assert "still running" in page.content.decode()
    assert not server.requests


def test_slots_hold_across_threads(limits):
    """Two threads of one process, one account: the second is refused while the first holds its slot."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with check_slot(7):
            holding.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(5)
        with pytest.raises(ChecksBusy) as busy, check_slot(7):
            pass
        assert not busy.value.whole_process
    finally:
        release.set()
        thread.join(5)
    with check_slot(7):
        pass  # free again
