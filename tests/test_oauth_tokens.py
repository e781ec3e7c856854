"""connections/oauth/tokens.py against a real OAuth 2.1 authorization server (FastMCP's, tests/oauth_mcp_server.py):
tokens stored encrypted, refreshed when they expire, one refresh when two workers race, "sign in again" when the
refresh is refused, revocation."""

import base64
import hashlib
import secrets
import threading
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from connections.models import GrantKind, GrantStatus, OAuthGrant
from connections.oauth import tokens
from tests.factories import UserFactory
from tests.oauth_mcp_server import OAuthMcpServer, running_oauth_mcp_server

REDIRECT = "http://127.0.0.1:9/callback"


def sign_in(server: OAuthMcpServer) -> tuple[tokens.Client, tokens.Tokens]:
    """What a person's sign-in ends with, done here by hand: register, authorize (the test server approves at once),
    exchange the code."""
    registered = httpx2.post(
        f"{server.base}/register",
        json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post", "client_name": "t"},
    ).json()
    client = tokens.Client(registered["client_id"], registered["client_secret"], "client_secret_post")
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    answer = httpx2.get(
        f"{server.base}/authorize",
        params={
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s" * 20,
        },
    )
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    return client, tokens.token_request(f"{server.base}/token", client, form)


@pytest.fixture
def server():
    with running_oauth_mcp_server() as running:
        yield running


def stored(server: OAuthMcpServer) -> OAuthGrant:
    client, issued = sign_in(server)
    return tokens.store_grant(
        UserFactory().pk,
        GrantKind.MCP,
        client=client,
        token_endpoint=f"{server.base}/token",
        revocation_endpoint=f"{server.base}/revoke",
        tokens=issued,
    )


@pytest.mark.django_db
def test_tokens_are_stored_encrypted_and_handed_out_while_fresh(server):
    grant = stored(server)
    access = tokens.access_token(grant.pk)

    assert access in server.provider.access_tokens
    grant.refresh_from_db()
    assert access not in grant.access_token_encrypted
    assert grant.client_secret_encrypted and "secret" not in grant.client_secret_encrypted
    assert len(server.posted("/token")) == 1  # the code exchange only: nothing refreshed


@pytest.mark.django_db
def test_an_expiring_token_is_refreshed_and_the_new_one_stored(server):
    grant = stored(server)
    old = tokens.access_token(grant.pk)
    OAuthGrant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() + timedelta(seconds=30))

    fresh = tokens.access_token(grant.pk)

    assert fresh != old and fresh in server.provider.access_tokens
    assert tokens.access_token(grant.pk) == fresh  # stored: no second refresh
    refreshes = [r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]
    assert len(refreshes) == 1


@pytest.mark.django_db
def test_a_rejected_token_is_refreshed_once(server):
    grant = stored(server)
    old = tokens.access_token(grant.pk)

    fresh = tokens.access_token(grant.pk, rejected=old)

    assert fresh != old
    assert tokens.access_token(grant.pk, rejected=old) == fresh  # a second worker with the same 401: no refresh


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite's shared in-memory test database refuses a second writer at once ('database table is locked') "
    "instead of waiting: the race needs PostgreSQL (CI's second pass)",
)
def test_two_workers_racing_spend_the_refresh_token_once(server):
    """The server rotates refresh tokens: had both workers spent the old one, the second would be refused and the
    grant would wrongly need a new sign-in."""
    grant = stored(server)
    OAuthGrant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    results: list[str] = []
    start = threading.Barrier(2)

    def worker() -> None:
        try:
            start.wait()
            results.append(tokens.access_token(grant.pk))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(results) == 2 and results[0] == results[1]
    refreshes = [r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]
    assert len(refreshes) == 1
    assert OAuthGrant.objects.get(pk=grant.pk).status == GrantStatus.ACTIVE


@pytest.mark.django_db
def test_a_refused_refresh_asks_for_a_new_sign_in(server):
    grant = stored(server)
    server.revoke_all_refresh_tokens()
    OAuthGrant.objects.filter(pk=grant.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(tokens.SignInAgain, match="sign in again"):
        tokens.access_token(grant.pk)

    grant.refresh_from_db()
    assert grant.status == GrantStatus.SIGN_IN_AGAIN and grant.needs_sign_in
    with pytest.raises(tokens.SignInAgain):  # and no further refresh is tried
        tokens.access_token(grant.pk)
    assert len([r for r in server.posted("/token") if r["form"].get("grant_type") == "refresh_token"]) == 1


@pytest.mark.django_db
def test_an_unreachable_token_endpoint_changes_nothing(server):
    grant = stored(server)
    OAuthGrant.objects.filter(pk=grant.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1), token_endpoint="http://127.0.0.1:9/token"
    )

    with pytest.raises(tokens.TokenUnavailable, match="Could not connect"):
        tokens.access_token(grant.pk)

    grant.refresh_from_db()
    assert grant.status == GrantStatus.ACTIVE and grant.refresh_lease == ""


@pytest.mark.django_db
def test_revoking_ends_the_tokens_at_the_server(server):
    grant = stored(server)
    access = tokens.access_token(grant.pk)

    assert tokens.revoke(grant) is True

    assert access not in server.provider.access_tokens
    assert not server.provider.refresh_tokens
    assert server.posted("/revoke")
