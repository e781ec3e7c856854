"""Connect Google from the console in a real Chromium: the Connections page, the provider's consent page (the test
authorization server on 127.0.0.1), back to Connections with the mailbox and calendar connected; then disconnect,
which revokes the tokens at the provider. The mail and calendar servers are real too (Dovecot's oauth2 passdb,
aiosmtpd with XOAUTH2, Radicale behind a bearer proxy)."""

import re

import pytest
import requests

from connections import crypto
from connections.models import CalendarAccount, MailAccount, OAuthGrant
from tests import oauth_mail_servers as peers
from tests.browser.conftest import log_in
from tests.factories import UserFactory
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

oauth, oauth_dovecot, xoauth2_smtp, caldav_server = (
    peers.oauth,
    peers.oauth_dovecot,
    peers.xoauth2_smtp,
    peers.caldav_server,
)

PASSWORD = "a long and uncommon passphrase"


@pytest.fixture
def google(settings, live_server, oauth, oauth_dovecot, xoauth2_smtp, caldav_server):
    address = oauth_dovecot.next_user() + "@example.com"
    caldav_server.make_calendar(address, "Events")
    oauth.signed_in = address
    settings.GOOGLE_OAUTH_CLIENT_ID = CLIENT_ID
    settings.GOOGLE_OAUTH_CLIENT_SECRET = CLIENT_SECRET
    settings.GOOGLE_OAUTH_AUTHORIZATION_URL = oauth.authorization_url
    settings.GOOGLE_OAUTH_TOKEN_URL = oauth.token_url
    settings.GOOGLE_OAUTH_REVOCATION_URL = oauth.revocation_url
    settings.GOOGLE_OAUTH_ISSUER = oauth.url
    settings.GOOGLE_IMAP = f"127.0.0.1:{oauth_dovecot.port}:none"
    settings.GOOGLE_SMTP = f"127.0.0.1:{xoauth2_smtp.port}:none"
    settings.GOOGLE_CALDAV_URL = caldav_server.url
    settings.PUBLIC_BASE_URL = live_server.url
    # The first request of a fresh process imports the console's views: on a loaded machine that alone can take
    # longer than the browser's 10 s, so it is made here, without a deadline that matters.
    requests.get(live_server.url + "/login/", timeout=120)
    return address


def test_connect_google_then_disconnect_it(page, live_server, google, oauth):
    UserFactory(email="ada@example.com", password=PASSWORD)
    log_in(page, "ada@example.com", PASSWORD)
    page.goto("/connections/")
    card = page.locator("[data-provider=google]")
    card.get_by_label("Calendar: list, add and delete events").wait_for()

    card.get_by_role("button", name="Connect Google").click()

    page.wait_for_url(re.compile(re.escape(oauth.url) + r"/authorize\?"))
    assert page.locator("#who").inner_text() == google
    assert "https://mail.google.com/" in page.locator("#scopes").inner_text()
    page.get_by_role("link", name="Allow").click()

    page.wait_for_url(re.compile(r"/connections/$"))
    page.get_by_text(f"Connected your Google mail and calendar ({google}).").wait_for()
    card = page.locator("[data-provider=google]")
    assert card.locator(".badge--active").inner_text() == "Connected"
    assert card.get_by_text("Mail and calendar").is_visible()
    assert card.get_by_text(google).is_visible()
    grant = OAuthGrant.objects.get()
    access = crypto.decrypt(grant.access_token_encrypted)
    assert access not in page.content() and access not in page.url
    assert MailAccount.objects.get().address == google and CalendarAccount.objects.get().username == google

    card.get_by_role("link", name="Disconnect Google").click()
    page.get_by_text("We also ask Google to revoke the sign-in").wait_for()
    page.get_by_role("button", name="Disconnect Google").click()
    page.get_by_text("Disconnected Google: removed here, and the sign-in revoked at Google.").wait_for()
    assert oauth.active(access) is None
    assert not OAuthGrant.objects.exists() and not MailAccount.objects.exists()
    page.locator("[data-provider=google]").get_by_role("button", name="Connect Google").wait_for()
