"""Connecting an MCP server behind OAuth from the console, in Chromium: the add form sends the browser to the
server's sign-in page (a real FastMCP authorization server with dynamic registration and PKCE) and back to our
callback; the tools are listed; a revoked sign-in shows "Sign in again", which signs in again; removing revokes."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import sign_up as create_account
from connections.models import Connection, GrantStatus, OAuthGrant
from tests.browser.conftest import log_in
from tests.oauth_mcp_server import running_oauth_mcp_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EMAIL = "ada@example.com"
PASSWORD = "a long and uncommon passphrase"


@pytest.fixture
def server(settings, live_server):
    settings.PUBLIC_BASE_URL = live_server.url  # the callback the server sends the browser back to
    with running_oauth_mcp_server() as running:
        yield running


def test_connect_a_server_behind_oauth_sign_in_again_and_remove_it(page, server):
    create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    log_in(page, EMAIL, PASSWORD)
    page.goto("/connections/")
    page.get_by_label("Name", exact=True).fill("Notes")
    page.get_by_label("Server URL", exact=True).fill(server.url)

    page.get_by_role("button", name="Connect", exact=True).click()

    # Through the server's /authorize (which approves at once) and back to our callback, then to the list.
    # (The form's answer, at /connections/ too, is the page that moves on to the server's sign-in page.)
    page.get_by_text("Signed in to Notes: 2 tools.").wait_for(timeout=30_000)
    assert any(r["path"] == "/authorize" for r in server.requests)
    row = page.locator("tr", has_text="Notes")
    assert row.get_by_text("Signed in", exact=True).is_visible()
    row.get_by_text("2 tools").click()
    assert row.get_by_text("create_note").is_visible()
    connection = Connection.objects.get()
    assert connection.oauth_grant.status == GrantStatus.ACTIVE

    # The server revokes the sign-in; the next sync finds out and the page says to sign in again.
    server.revoke_all_refresh_tokens()
    OAuthGrant.objects.filter(pk=connection.oauth_grant_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    row.get_by_role("button", name="Sync tools").click()
    page.get_by_text("Could not sync Notes").wait_for(timeout=30_000)
    row = page.locator("tr", has_text="Notes")
    assert row.locator('[data-sign-in="needed"]').is_visible()

    row.get_by_role("button", name="Sign in again").click()
    page.get_by_text("Signed in to Notes: 2 tools.").wait_for(timeout=30_000)
    assert OAuthGrant.objects.get().status == GrantStatus.ACTIVE
    assert not page.locator('[data-sign-in="needed"]').count()

    page.locator("tr", has_text="Notes").get_by_role("link", name="Remove").click()
    page.get_by_role("button", name="Remove connection").click()
    page.wait_for_url(re.compile(r"/connections/$"))
    assert any(r["path"] == "/revoke" for r in server.requests)
    assert not server.provider.refresh_tokens
    assert not Connection.objects.exists() and not OAuthGrant.objects.exists()


def test_a_foreign_callback_is_shown_plainly(page, context, server):
    create_account(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="whatsapp")
    log_in(page, EMAIL, PASSWORD)

    page.goto("/connections/oauth/callback/?error=access_denied&state=not-one-of-yours")

    assert page.get_by_role("heading", name="The sign-in did not complete").is_visible()
    assert page.get_by_role("alert").inner_text().startswith("This sign-in was not started in this browser session")
    assert not Connection.objects.exists()
    assert [p for p in context.problems if "status of 400" not in p] == []  # the refusal is a 400, on purpose
    context.problems.clear()
