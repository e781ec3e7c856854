"""POST /api/v1/mcp/connections/cli and friends, against a real FastMCP server on 127.0.0.1."""

import json
import socket
from contextlib import contextmanager

import pytest

from connections.models import Connection
from tests.conftest import post
from tests.mcp_server import SERVER_KEY, running_mcp_server
from tests.oauth_mcp_server import running_oauth_mcp_server

pytestmark = pytest.mark.django_db

ADD = "/api/v1/mcp/connections/cli"


@pytest.fixture
def mcp_server():
    with running_mcp_server() as server:
        yield server


@pytest.fixture
def keyed_mcp_server():
    with running_mcp_server(require_key=True) as server:
        yield server


def test_it_connects_stores_the_connection_and_lists_its_tools(client, v2, mcp_server):
    response = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": mcp_server.url})

    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["name"] == "Tracker"
    assert answer["serverUrl"] == mcp_server.url
    assert answer["id"].startswith("mcp_")
    tools = {tool["name"]: tool for tool in answer["tools"]}
    assert set(tools) == {"add", "create_issue", "broken", "hang", "build_report"}
    assert tools["add"]["description"] == "Add two whole numbers."
    assert tools["add"]["inputSchema"]["properties"]["a"]["type"] == "integer"
    stored = Connection.objects.get()
    assert (stored.owner, stored.server_name, stored.server_version) == (v2[0].owner, "Test tools", "1.2.3")
    assert stored.tools.count() == 5
    assert stored.last_synced_at is not None


def test_the_servers_key_is_sent_stored_encrypted_and_never_shown(client, v2, keyed_mcp_server):
    response = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": keyed_mcp_server.url, "apiKey": SERVER_KEY})

    assert response.status_code == 201, response.content
    assert SERVER_KEY not in response.content.decode()
    assert keyed_mcp_server.requests[0]["authorization"] == f"Bearer {SERVER_KEY}"
    stored = Connection.objects.get()
    assert stored.api_key_encrypted and SERVER_KEY not in stored.api_key_encrypted
    listed = client.get("/api/v1/mcp/connections", headers={"Authorization": f"Bearer {v2[1]}"})
    assert SERVER_KEY not in listed.content.decode()
    assert listed.json()["connections"][0]["hasApiKey"] is True


def test_a_server_that_wants_a_key_is_a_422_that_says_so(client, v2, keyed_mcp_server):
    response = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": keyed_mcp_server.url})

    assert response.status_code == 422
    assert response.json()["code"] == "mcp_authentication_required"
    assert "--api-key" in response.json()["message"]
    assert "error" not in response.json()  # not OAUTH_REQUIRED: the server publishes no OAuth metadata, a key it is
    assert not Connection.objects.exists()


def test_a_server_that_signs_in_with_oauth_is_oauth_required_as_poke_answers(client, v2):
    with running_oauth_mcp_server() as server:
        response = post(client, ADD, v2[1], {"name": "Notes", "serverUrl": server.url})

    assert response.status_code == 422
    assert response.json()["error"] == "OAUTH_REQUIRED"  # what the official CLI reads
    assert response.json()["code"] == "mcp_oauth_required"
    assert "web console" in response.json()["message"]
    assert not Connection.objects.exists() and not server.posted("/register")  # no sign-in started


def test_an_unreachable_server_is_a_422_and_nothing_is_stored(client, v2):
    with socket_that_refuses() as port:
        response = post(client, ADD, v2[1], {"name": "Gone", "serverUrl": f"http://127.0.0.1:{port}/mcp"})

    assert response.status_code == 422
    assert response.json()["code"] == "mcp_server_unusable"
    assert "Could not connect" in response.json()["message"]
    assert not Connection.objects.exists()


def test_a_server_that_is_not_mcp_is_a_422(client, v2, assistant_server):
    assistant_server.answer(200, b"<html>hello</html>", Content_Type="text/html")
    response = post(client, ADD, v2[1], {"name": "Web page", "serverUrl": assistant_server.url + "/mcp"})

    assert response.status_code == 422
    assert "not as an MCP server" in response.json()["message"]


def test_a_wrong_path_on_an_mcp_server_is_a_422_naming_the_status(client, v2, mcp_server):
    response = post(client, ADD, v2[1], {"name": "T", "serverUrl": mcp_server.url.replace("/mcp", "/nope")})

    assert response.status_code == 422
    assert "HTTP 404" in response.json()["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"serverUrl": "https://example.com/mcp"}, '"name"'),
        ({"name": "  ", "serverUrl": "https://example.com/mcp"}, '"name"'),
        ({"name": "x" * 101, "serverUrl": "https://example.com/mcp"}, "longer than 100"),
        ({"name": "T"}, '"serverUrl"'),
        ({"name": "T", "serverUrl": 5}, '"serverUrl"'),
        ({"name": "T", "serverUrl": "ftp://example.com/mcp"}, "http:// or https://"),
        ({"name": "T", "serverUrl": "file:///etc/passwd"}, "http:// or https://"),
        ({"name": "T", "serverUrl": "javascript:alert(1)"}, "http:// or https://"),
        ({"name": "T", "serverUrl": "https://user:pw@example.com/mcp"}, "user name or password"),
        ({"name": "T", "serverUrl": "https:///mcp"}, "no host"),
        ({"name": "T", "serverUrl": "https://example.com:99999/mcp"}, "not a valid URL"),
        ({"name": "T", "serverUrl": "https://exa mple.com/mcp"}, "spaces"),
        ({"name": "T", "serverUrl": "https://example.com/" + "a" * 2000}, "longer than 2000"),
        ({"name": "T", "serverUrl": "https://example.com/mcp", "apiKey": 7}, '"apiKey"'),
        ({"name": "T", "serverUrl": "https://example.com/mcp", "apiKey": "a\nb"}, '"apiKey"'),
    ],
)
def test_bad_bodies_are_400_with_the_reason(client, v2, body, fragment):
    response = post(client, ADD, v2[1], body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_body"
    assert fragment in response.json()["message"]
    assert not Connection.objects.exists()


def test_a_body_that_is_not_an_object_is_400(client, v2):
    response = post(client, ADD, v2[1], ["name"])
    assert response.status_code == 400


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/mcp",
        "http://localhost/mcp",
        "http://10.0.0.5/mcp",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/mcp",
        "http://[::ffff:127.0.0.1]/mcp",
        "http://[::127.0.0.1]/mcp",
        "http://[::ffff:0:127.0.0.1]/mcp",
        "http://[64:ff9b::127.0.0.1]/mcp",
        "http://[2002:7f00:1::]/mcp",
        "http://0.0.0.0/mcp",
        "http://192.168.1.1/mcp",
    ],
)
def test_private_and_loopback_addresses_are_refused_unless_allowed(client, v2, settings, url):
    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False
    response = post(client, ADD, v2[1], {"name": "Inside", "serverUrl": url})

    assert response.status_code == 400
    assert "public addresses" in response.json()["message"]
    assert not Connection.objects.exists()


def test_a_name_that_resolves_to_loopback_is_refused_even_when_checked_late(v2, settings, mcp_server):
    """The address each connection is opened to is checked too, not only the URL when it is added."""
    from connections import client as mcp_client

    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False
    with pytest.raises(mcp_client.McpError, match="Could not connect"):
        mcp_client.list_tools(mcp_server.url.replace("127.0.0.1", "localhost"), timeout=3)


def test_tunnels_are_refused_with_a_clear_message(client, v2):
    response = post(client, ADD, v2[1], {"name": "T", "serverUrl": "http://localhost:3000/mcp", "tunnel": True})
    assert response.status_code == 400
    assert response.json()["code"] == "tunnels_not_supported"
    assert "poke mcp add" in response.json()["message"]
    for action in ("activate-tunnel", "create-recipe"):
        response = post(client, f"/api/v1/mcp/connections/mcp_{'a' * 20}/{action}", v2[1], {})
        assert (response.status_code, response.json()["code"]) == (400, "tunnels_not_supported")


def test_sync_tools_reads_them_again(client, v2, mcp_server):
    connection_id = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": mcp_server.url}).json()["id"]
    stored = Connection.objects.get()
    stored.tools.filter(name="add").delete()

    response = post(client, f"/api/v1/mcp/connections/{connection_id}/sync-tools", v2[1], {})

    assert response.status_code == 200
    assert len(response.json()["tools"]) == 5
    assert stored.tools.filter(name="add").exists()


def test_a_failed_sync_keeps_the_tools_and_records_the_error(client, v2):
    with running_mcp_server() as server:
        connection_id = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": server.url}).json()["id"]
    response = post(client, f"/api/v1/mcp/connections/{connection_id}/sync-tools", v2[1], {})

    assert response.status_code == 422
    stored = Connection.objects.get()
    assert stored.tools.count() == 5
    assert "Could not connect" in stored.last_error


def test_another_accounts_connection_is_a_404(client, v2, mcp_server, db):
    from keys.models import Generation
    from tests.factories import UserFactory, make_key

    connection_id = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": mcp_server.url}).json()["id"]
    other_key = make_key(UserFactory(email="kim@example.com"), "other", Generation.V2)[1]
    for path in (f"/api/v1/mcp/connections/{connection_id}", f"/api/v1/mcp/connections/{connection_id}/sync-tools"):
        response = post(client, path, other_key, {})
        assert response.status_code in (404, 405)
    response = client.delete(
        f"/api/v1/mcp/connections/{connection_id}", headers={"Authorization": f"Bearer {other_key}"}
    )
    assert response.status_code == 404
    assert Connection.objects.exists()
    response = client.get("/api/v1/mcp/connections/mcp_%00", headers={"Authorization": f"Bearer {other_key}"})
    assert response.status_code == 404


def test_delete_removes_the_connection_and_its_tools(client, v2, mcp_server):
    connection_id = post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": mcp_server.url}).json()["id"]
    response = client.delete(f"/api/v1/mcp/connections/{connection_id}", headers={"Authorization": f"Bearer {v2[1]}"})
    assert response.status_code == 200
    assert not Connection.objects.exists()


def test_without_a_key_it_is_401(client):
    response = post(client, ADD, None, {"name": "T", "serverUrl": "https://example.com/mcp"})
    assert response.status_code == 401


def test_the_encryption_keys_rotate(v2, mcp_server, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    from connections import crypto, services

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.MCP_ENCRYPTION_KEYS = [old]
    with running_mcp_server(require_key=True) as server:
        connection = services.add_connection(v2[0].owner, "Tracker", server.url, SERVER_KEY)
        written_with_old = Connection.objects.get().api_key_encrypted
        settings.MCP_ENCRYPTION_KEYS = [new, old]
        call_command("rotatemcpkeys")
        settings.MCP_ENCRYPTION_KEYS = [new]
        connection.refresh_from_db()
        assert connection.api_key_encrypted != written_with_old
        assert crypto.decrypt(connection.api_key_encrypted) == SERVER_KEY
        services.sync_tools(connection)  # the server accepts the key decrypted with the new key alone


@contextmanager
def socket_that_refuses():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    yield port


def test_a_person_has_at_most_twenty_connections(client, v2, mcp_server):
    from connections.services import MAX_CONNECTIONS

    Connection.objects.bulk_create(
        Connection(owner=v2[0].owner, name=f"C{n}", server_url=mcp_server.url) for n in range(MAX_CONNECTIONS)
    )
    response = post(client, ADD, v2[1], {"name": "One more", "serverUrl": mcp_server.url})
    assert response.status_code == 400
    assert "remove one first" in response.json()["message"]
    assert Connection.objects.count() == MAX_CONNECTIONS


def test_staff_see_connections_and_tools_in_the_admin_never_the_key(client, v2, keyed_mcp_server):
    from tests.factories import UserFactory

    post(client, ADD, v2[1], {"name": "Tracker", "serverUrl": keyed_mcp_server.url, "apiKey": SERVER_KEY})
    stored = Connection.objects.get()
    client.force_login(UserFactory(email="staff@example.com", is_staff=True, is_superuser=True))

    page = client.get(f"/admin/connections/connection/{stored.pk}/change/").content.decode()

    assert "Tracker" in page and "create_issue" in page
    assert SERVER_KEY not in page and stored.api_key_encrypted not in page
    assert client.get("/admin/connections/connection/?api_key_encrypted__startswith=g").status_code in (302, 400)


@pytest.mark.django_db(transaction=True)
def test_concurrent_adds_do_not_pass_the_cap_together(v2, mcp_server, settings):
    """Each add reads the server between its first count and its insert: without the owner's row locked around the
    second count and the insert, several adds counted the same rows (40 at once left 24 against a cap of 20)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, connections

    from connections.services import MAX_CONNECTIONS, ConnectionRefused, add_connection

    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions need PostgreSQL (CI's second pass)")
    settings.MCP_CHECKS_PER_ACCOUNT = settings.MCP_CHECKS_PER_PROCESS = 10  # all six check the server at once
    owner = v2[0].owner
    Connection.objects.bulk_create(
        Connection(owner=owner, name=f"C{n}", server_url=mcp_server.url) for n in range(MAX_CONNECTIONS - 1)
    )

    def add(n: int) -> str:
        try:
            add_connection(owner, f"Racer {n}", mcp_server.url)
            return "added"
        except ConnectionRefused:
            return "refused"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(add, range(6)))

    assert Connection.objects.filter(owner=owner).count() == MAX_CONNECTIONS
    assert outcomes.count("added") == 1


def test_an_answer_over_the_size_limit_is_refused_while_it_is_read(client, v2, settings, caplog):
    """A tools/list of 16 MB was read whole into memory (six at once took a web worker past 1 GB): the client stops
    reading at MCP_MAX_ANSWER_BYTES and says why. What our side read is what counts (ops/bounded.py logs it): how
    much the server managed to write before we hung up depends on the kernel's socket buffers."""
    from tests.mcp_raw_server import running_raw_mcp_server, tool

    settings.MCP_MAX_ANSWER_BYTES = 1_000_000
    huge = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool("big", "x" * 16_000_000)]}}
    body = json.dumps(huge).encode()
    with running_raw_mcp_server(lambda cursor: body) as server:
        response = post(client, ADD, v2[1], {"name": "Huge", "serverUrl": server.url})

    assert response.status_code == 422, response.content
    assert "larger than 1 MB" in response.json()["message"]
    (refusal,) = [record for record in caplog.records if record.msg.startswith("bounded.refused")]
    bytes_read = refusal.args[2]
    assert 1_000_000 < bytes_read <= 1_000_000 + 65_536  # it stopped at the first piece past the limit
    assert not Connection.objects.exists()


def test_tools_are_counted_while_the_pages_are_read(client, v2):
    """A server that pages on and on: reading stops at the first page past MAX_TOOLS, not at the fiftieth page."""
    from connections.client import MAX_TOOLS
    from tests.mcp_raw_server import running_raw_mcp_server, tool

    def page(cursor: str | None) -> dict:
        n = int(cursor or 0)
        return {"tools": [tool(f"t{n}_{i}") for i in range(50)], "nextCursor": str(n + 1)}

    with running_raw_mcp_server(page) as server:
        response = post(client, ADD, v2[1], {"name": "Endless", "serverUrl": server.url})

    assert response.status_code == 422, response.content
    assert f"more than {MAX_TOOLS} tools" in response.json()["message"]
    assert server.tools_list_calls == MAX_TOOLS // 50 + 1
