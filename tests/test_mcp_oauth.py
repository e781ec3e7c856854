"""MCP servers behind OAuth, through the console's pages (Django's test client as the browser; the Chromium run is
tests/browser/test_mcp_oauth_console.py) against a real MCP server and a real OAuth 2.1 authorization server
(tests/oauth_mcp_server.py): discovery, dynamic registration or a pasted client, PKCE, the resource parameter, the
callback's state, tokens used, refreshed and revoked, and "sign in again"."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.test import Client
from django.utils import timezone

from connections import crypto
from connections import services as connections
from connections.models import Connection, GrantStatus, OAuthGrant, OAuthSignIn
from conversations.models import Delivery, DeliveryStatus
from tests.factories import UserFactory
from tests.oauth_mcp_server import CLIENT_ID, CLIENT_SECRET, OAuthMcpServer, running_oauth_mcp_server

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/connections/oauth/callback/"


@pytest.fixture(autouse=True)
def _callback_here(settings):
    settings.PUBLIC_BASE_URL = "http://testserver"


@pytest.fixture
def server():
    with running_oauth_mcp_server() as running:
        yield running


@pytest.fixture
def console(client, user):
    client.force_login(user)
    return client


def start(console: Client, server: OAuthMcpServer, name: str = "Notes", **fields: str) -> str:
    """Submit the add form; the page that sends the browser to the server's sign-in, and its URL."""
    response = console.post("/connections/", {"name": name, "server_url": server.url, "api_key": "", **fields})
    assert response.status_code == 200, response.content.decode()[:2000]
    assert "connections/sign_in_redirect.html" in [t.name for t in response.templates]
    return response.context["authorization_url"]


def authorize(url: str) -> str:
    """What the person's browser does at the server's sign-in page (this one approves at once): the callback's path
    and query."""
    answer = httpx2.get(url)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(CALLBACK)
    return location.removeprefix("http://testserver")


def sign_in(console: Client, server: OAuthMcpServer, name: str = "Notes", **fields: str) -> Connection:
    back = console.get(authorize(start(console, server, name, **fields)))
    assert back.status_code == 302, back.content.decode().partition("data-sign-in")[2][:600]
    return Connection.objects.get(name=name)


def test_a_server_behind_oauth_is_signed_in_registered_and_its_tools_listed(console, server, user):
    url = start(console, server)

    query = parse_qs(urlsplit(url).query)
    assert url.startswith(f"{server.base}/authorize?")
    assert query["response_type"] == ["code"]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["resource"] == [server.url]  # RFC 8707: the token is for this server only
    assert query["redirect_uri"] == [CALLBACK]
    assert len(server.posted("/register")) == 1
    assert query["client_id"][0] in server.provider.clients
    assert server.provider.clients[query["client_id"][0]].redirect_uris[0].unicode_string() == CALLBACK
    assert not Connection.objects.exists()  # nothing until the person comes back

    back = console.get(authorize(url))

    assert back.status_code == 302 and back.url == "/connections/"
    connection = Connection.objects.get()
    assert (connection.owner, connection.name, connection.server_url) == (user, "Notes", server.url)
    assert {tool.name for tool in connection.tools.all()} == {"whoami", "create_note"}
    grant = connection.oauth_grant
    assert grant is not None and grant.status == GrantStatus.ACTIVE
    exchange = server.posted("/token")[0]["form"]
    assert exchange["grant_type"] == "authorization_code" and len(exchange["code_verifier"]) >= 43
    assert exchange["resource"] == server.url
    access = crypto.decrypt(grant.access_token_encrypted)
    assert access in server.provider.access_tokens and access not in grant.access_token_encrypted
    listing = console.get("/connections/").content.decode()
    assert "Signed in" in listing and access not in listing
    assert not OAuthSignIn.objects.exists()  # used once, gone


def test_a_server_without_registration_takes_a_pasted_client(console):
    with running_oauth_mcp_server(registration=False, redirect_uri=CALLBACK) as server:
        response = console.post("/connections/", {"name": "Notes", "server_url": server.url, "api_key": ""})
        assert response.status_code == 400
        page = response.content.decode()
        assert "does not register clients itself" in page and CALLBACK in page

        connection = sign_in(console, server, oauth_client_id=CLIENT_ID, oauth_client_secret=CLIENT_SECRET)

    assert connection.oauth_grant.client_id == CLIENT_ID
    assert CLIENT_SECRET not in connection.oauth_grant.client_secret_encrypted
    exchange = server.posted("/token")[0]
    sent_secret = exchange["form"].get("client_secret") or exchange["headers"].get("authorization", "")
    assert sent_secret  # client_secret_basic or _post, as the server's metadata offers
    assert not server.posted("/register")


def test_a_callback_is_used_once(console, server):
    back = authorize(start(console, server))
    assert console.get(back).status_code == 302

    again = console.get(back)

    assert again.status_code == 400
    assert "already used or has expired" in again.context["reason"]
    assert Connection.objects.count() == 1 and OAuthGrant.objects.count() == 1


def test_a_callback_in_another_persons_session_is_refused(console, server):
    back = authorize(start(console, server))
    other = Client()
    other.force_login(UserFactory())

    refused = other.get(back)

    assert refused.status_code == 400
    assert "not started in this browser session" in refused.context["reason"]
    assert not Connection.objects.exists() and not OAuthGrant.objects.exists()


def test_a_code_from_another_persons_sign_in_is_refused(console, server):
    theirs = parse_qs(urlsplit(authorize(start(console, server))).query)["code"][0]
    other = Client()
    other.force_login(UserFactory())
    mine = parse_qs(urlsplit(start(other, server)).query)["state"][0]

    refused = other.get("/connections/oauth/callback/", {"code": theirs, "state": mine})

    assert refused.status_code == 400
    assert "refused the sign-in's code" in refused.context["reason"]
    assert not Connection.objects.exists() and not OAuthGrant.objects.exists()


def test_a_forged_state_is_refused(console, server):
    start(console, server)

    refused = console.get("/connections/oauth/callback/", {"code": "x", "state": "forged-state-value"})

    assert refused.status_code == 400
    assert not Connection.objects.exists()


def test_a_denial_at_the_server_is_shown_plainly(console, server):
    state = parse_qs(urlsplit(start(console, server)).query)["state"][0]

    denied = console.get(
        "/connections/oauth/callback/",
        {"error": "access_denied", "error_description": "The user said no", "state": state},
    )

    assert denied.status_code == 400
    assert denied.context["reason"].startswith(
        "The sign-in was declined at the server (access_denied The user said no)"
    )
    assert "declined at the server" in denied.content.decode()
    assert not Connection.objects.exists()


def test_the_authorization_endpoint_must_be_https_in_production(console, server, settings):
    settings.OAUTH_ALLOW_HTTP = False

    response = console.post("/connections/", {"name": "Notes", "server_url": server.url, "api_key": ""})

    assert response.status_code == 400
    assert "is not https" in response.content.decode()
    assert not OAuthSignIn.objects.exists() and not server.posted("/register")


def test_a_refresh_after_expiry_and_removal_revokes(console, server):
    connection = sign_in(console, server)
    OAuthGrant.objects.filter(pk=connection.oauth_grant_id).update(expires_at=timezone.now() - timedelta(seconds=5))

    connections.sync_tools(Connection.objects.get(pk=connection.pk))

    refreshes = [r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]
    assert len(refreshes) == 1 and refreshes[0]["form"]["resource"] == server.url
    assert console.post(f"/connections/{connection.public_id}/remove/").status_code == 302
    assert server.posted("/revoke")
    assert not server.provider.access_tokens and not server.provider.refresh_tokens
    assert not Connection.objects.exists() and not OAuthGrant.objects.exists()


def test_a_revoked_sign_in_shows_sign_in_again_and_signing_in_again_restores_it(console, server):
    connection = sign_in(console, server)
    server.forget_access_tokens()
    server.revoke_all_refresh_tokens()

    with pytest.raises(connections.ConnectionRefused, match="sign in again"):
        connections.sync_tools(Connection.objects.get(pk=connection.pk))

    page = console.get("/connections/").content.decode()
    assert 'data-sign-in="needed"' in page
    again = console.post(f"/connections/{connection.public_id}/sign-in/")
    assert again.status_code == 200
    assert console.get(authorize(again.context["authorization_url"])).status_code == 302
    grant = OAuthGrant.objects.get()
    assert grant.status == GrantStatus.ACTIVE and Connection.objects.count() == 1
    assert 'data-sign-in="needed"' not in console.get("/connections/").content.decode()


# --- the assistant ------------------------------------------------------------------------------------------------


def completion(content=None, tool_calls=None) -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}]}


def tool_call(name: str) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_messages(request) -> list[dict]:
    return [m for m in request.json()["messages"] if m["role"] == "tool"]


def test_the_assistant_calls_a_tool_with_the_token_refreshing_once_after_a_401(console, server, send, llm, v2):
    connection = sign_in(console, server)
    server.forget_access_tokens()  # the server stops taking the token we hold: its 401 makes us refresh once
    llm.answer(200, completion(tool_calls=[tool_call("notes__whoami")]))
    llm.answer(200, completion("You are signed in."))

    send(v2[1], {"message": "Am I signed in to my notes?"})

    assert ("whoami", {}) in server.calls
    assert tool_messages(llm.received[1])[0]["content"] == "signed in"
    grant = OAuthGrant.objects.get(pk=connection.oauth_grant_id)
    used = [
        r["headers"]["authorization"]
        for r in server.requests
        if r["path"] == "/mcp" and "authorization" in r["headers"]
    ]
    assert used[-1] == f"Bearer {crypto.decrypt(grant.access_token_encrypted)}"
    refreshes = [r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]
    assert len(refreshes) == 1


def test_a_refused_refresh_is_said_in_the_thread_not_a_failed_delivery(console, server, send, llm, v2):
    sign_in(console, server)
    server.forget_access_tokens()
    server.revoke_all_refresh_tokens()
    llm.answer(200, completion(tool_calls=[tool_call("notes__whoami")]))
    llm.answer(200, completion("Your notes need you to sign in again."))

    send(v2[1], {"message": "Am I signed in to my notes?"})

    said = tool_messages(llm.received[1])[0]["content"]
    assert "Notes needs you to sign in again" in said and "Connections" in said
    delivery = Delivery.objects.order_by("-pk").first()
    assert delivery.status == DeliveryStatus.DELIVERED
    assert OAuthGrant.objects.get().status == GrantStatus.SIGN_IN_AGAIN


def test_a_tool_that_needs_more_access_asks_to_sign_in_again_and_then_runs(console, send, llm, v2):
    """The MCP authorization specification's scope challenge: a 403 insufficient_scope naming the scopes. No
    refresh (a new token of the same sign-in allows no more); the person is told what to do, the connection's page
    says it, and signing in again asks for the old scopes and the new one."""
    with running_oauth_mcp_server(
        registration=False, redirect_uri=CALLBACK, scopes=["notes:read"], private_scope="notes:private"
    ) as server:
        connection = sign_in(console, server, oauth_client_id=CLIENT_ID, oauth_client_secret=CLIENT_SECRET)
        # Trusted, so that its read-only claim holds for the key's second message, whose thread has the first
        # call's result in it (assistant/approval/rule.py: content from a tool counts as outside words).
        Connection.objects.filter(pk=connection.pk).update(trusted=True)
        assert OAuthGrant.objects.get().scope == "notes:read"
        llm.answer(200, completion(tool_calls=[tool_call("notes__private_notes")]))
        llm.answer(200, completion("Your notes need more access."))

        send(v2[1], {"message": "Read my private notes"})

        said = tool_messages(llm.received[1])[0]["content"]
        assert (
            "Notes needs more access than you allowed" in said and "notes:private" in said and "Sign in again" in said
        )
        assert ("private_notes", {}) not in server.calls
        assert not [r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]
        grant = OAuthGrant.objects.get()
        assert grant.scope_wanted == "notes:private" and grant.status == GrantStatus.ACTIVE
        assert 'data-sign-in="more-access"' in console.get("/connections/").content.decode()

        again = console.post(f"/connections/{connection.public_id}/sign-in/")
        url = again.context["authorization_url"]
        assert parse_qs(urlsplit(url).query)["scope"] == ["notes:read notes:private"]
        assert console.get(authorize(url)).status_code == 302
        grant.refresh_from_db()
        assert set(grant.scope.split()) == {"notes:read", "notes:private"} and grant.scope_wanted == ""
        assert 'data-sign-in="more-access"' not in console.get("/connections/").content.decode()

        llm.answer(200, completion(tool_calls=[tool_call("notes__private_notes")]))
        llm.answer(200, completion("Here they are."))
        send(v2[1], {"message": "Read my private notes"})

        assert ("private_notes", {}) in server.calls
        assert tool_messages(llm.received[3])[0]["content"] == "the private notes"


def test_oauth_tools_follow_the_approval_rules_of_every_mcp_tool(console, server, user):
    """A key's message: on a server the person trusts, its read-only tool runs with the bearer token; the one that
    acts waits for the person, as any MCP server's would."""
    from assistant.models import Action, ActionState
    from assistant.tools.toolbox import toolbox_for
    from tests.factories import delivery_under_way, make_key
    from tests.test_tool_ledger import call

    connection = sign_in(console, server)
    Connection.objects.filter(pk=connection.pk).update(trusted=True)  # its readOnlyHint is believed
    key, _ = make_key(user, "ci", tools_need_approval=True)
    delivery = delivery_under_way(user, key=key)
    box = toolbox_for(user, Delivery.objects.select_related("message__api_key").get(pk=delivery.pk), 1)

    assert call(box, "notes__whoami", {}) == "signed in"
    told = call(box, "notes__create_note", {"text": "buy milk"}, "call_2")

    assert "must approve it first" in told
    assert [name for name, _ in server.calls] == ["whoami"]  # create_note did not run
    states = dict(Action.objects.values_list("tool", "state"))
    assert states == {"whoami": ActionState.DONE, "create_note": ActionState.AWAITING_APPROVAL}


def test_staff_see_the_sign_in_never_its_tokens(console, server, admin_client):
    grant = sign_in(console, server).oauth_grant
    secrets_of_it = [crypto.decrypt(grant.access_token_encrypted), crypto.decrypt(grant.refresh_token_encrypted)]

    page = admin_client.get(f"/admin/connections/oauthgrant/{grant.pk}/change/")

    assert page.status_code == 200
    text = page.content.decode()
    assert grant.client_id in text
    assert not any(secret in text for secret in secrets_of_it)
    assert grant.access_token_encrypted not in text
    probe = admin_client.get("/admin/connections/oauthgrant/", {"access_token_encrypted__startswith": "g"})
    assert probe.status_code in (302, 400)  # no filtering on the encrypted tokens


def test_unfinished_sign_ins_are_pruned_once_too_old(console, server):
    from io import StringIO

    from django.core.management import call_command

    start(console, server)
    fresh = start(console, server, "Other")
    OAuthSignIn.objects.filter(pk=OAuthSignIn.objects.order_by("pk").first().pk).update(
        created_at=timezone.now() - timedelta(minutes=11)
    )

    call_command("pruneoauthsignins", stdout=StringIO())

    assert OAuthSignIn.objects.count() == 1
    assert console.get(authorize(fresh)).status_code == 302  # the recent one still finishes
