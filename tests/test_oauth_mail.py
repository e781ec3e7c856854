"""Google and Microsoft mail and calendar signed in to with OAuth (connections/oauth/mail.py, the console's
Connections page), end to end against real peers on 127.0.0.1: an Authlib authorization server standing in for
Google's and Microsoft's endpoints (tests/oauth_server.py), Dovecot with its oauth2 passdb, aiosmtpd with XOAUTH2
and Radicale behind a bearer-checking proxy (tests/oauth_mail_servers.py). Nothing of ours is mocked: the browser's
part is played by the Django test client (our pages) and plain HTTP (the provider's consent page)."""

import html
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.db import close_old_connections, connection
from django.urls import reverse

from assistant.models import Action
from assistant.tools.toolbox import toolbox_for
from connections import crypto
from connections.models import CalendarAccount, GrantKind, GrantStatus, MailAccount, OAuthGrant
from connections.oauth import mail as oauth_mail
from conversations.models import Delivery
from tests import oauth_mail_servers as peers
from tests.factories import delivery_under_way
from tests.mail_servers import silent_server
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, introspect

oauth, oauth_dovecot, xoauth2_smtp, caldav_server = (
    peers.oauth,
    peers.oauth_dovecot,
    peers.xoauth2_smtp,
    peers.caldav_server,
)

pytestmark = pytest.mark.django_db

CONNECTIONS = "/connections/"


@pytest.fixture
def address(oauth, oauth_dovecot, xoauth2_smtp, caldav_server) -> str:
    """A fresh person at the provider (an empty Dovecot account, a calendar), signed in at its consent page."""
    address = oauth_dovecot.next_user() + "@example.com"
    caldav_server.make_calendar(address, "Events")
    oauth.signed_in = address
    oauth.rotate_refresh_tokens = False
    oauth.require_refresh_scope = False
    oauth.one_resource_per_token = False
    oauth.withheld = set()
    oauth.access_seconds = 3600
    oauth.hold_refresh = None
    return address


@pytest.fixture
def google(settings, oauth, oauth_dovecot, xoauth2_smtp, caldav_server, address):
    settings.GOOGLE_OAUTH_CLIENT_ID = CLIENT_ID
    settings.GOOGLE_OAUTH_CLIENT_SECRET = CLIENT_SECRET
    settings.GOOGLE_OAUTH_AUTHORIZATION_URL = oauth.authorization_url
    settings.GOOGLE_OAUTH_TOKEN_URL = oauth.token_url
    settings.GOOGLE_OAUTH_REVOCATION_URL = oauth.revocation_url
    settings.GOOGLE_OAUTH_ISSUER = oauth.url
    settings.GOOGLE_IMAP = f"127.0.0.1:{oauth_dovecot.port}:none"
    settings.GOOGLE_SMTP = f"127.0.0.1:{xoauth2_smtp.port}:none"
    settings.GOOGLE_CALDAV_URL = caldav_server.url
    settings.PUBLIC_BASE_URL = "http://testserver"
    return settings


@pytest.fixture
def microsoft(settings, oauth, oauth_dovecot, xoauth2_smtp, address):
    settings.MICROSOFT_OAUTH_CLIENT_ID = CLIENT_ID
    settings.MICROSOFT_OAUTH_CLIENT_SECRET = CLIENT_SECRET
    settings.MICROSOFT_OAUTH_AUTHORIZATION_URL = oauth.url + "/authorize?tenant={tenant}"
    settings.MICROSOFT_OAUTH_TOKEN_URL = oauth.token_url
    settings.MICROSOFT_OAUTH_REVOCATION_URL = ""
    settings.MICROSOFT_IMAP = f"127.0.0.1:{oauth_dovecot.port}:none"
    settings.MICROSOFT_SMTP = f"127.0.0.1:{xoauth2_smtp.port}:none"
    settings.PUBLIC_BASE_URL = "http://testserver"
    oauth.rotate_refresh_tokens = True  # as Microsoft does
    oauth.require_refresh_scope = True
    oauth.one_resource_per_token = True
    return settings


@pytest.fixture
def person(user, client):
    user.profile.time_zone = "Europe/Paris"
    user.profile.save()
    client.force_login(user)
    return user


def start(client, kind: str, capabilities: list[str]) -> str:
    """Click "Connect": the authorization URL our server sends the browser to."""
    response = client.post(reverse("connections:oauth-mail-start", args=[kind]), {"capability": capabilities})
    assert response.status_code == 200, response.content[:500]
    found = re.search(r'<a class="btn btn--primary" href="([^"]+)"', response.content.decode())
    assert found is not None, response.content.decode()
    return html.unescape(found.group(1))


def consent(authorization_url: str, decision: str = "allow") -> str:
    """The provider's consent page, answered: the callback URL it sends the browser back to."""
    page = requests.get(authorization_url, timeout=10)
    assert page.status_code == 200, page.text
    link = re.search(rf'<a id="{decision}" href="([^"]+)"', page.text)
    assert link is not None, page.text
    base = authorization_url.split("/authorize")[0]
    answer = requests.get(base + html.unescape(link.group(1)), allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    return str(answer.headers["Location"])


def back(client, callback_url: str):
    parts = urlsplit(callback_url)
    return client.get(parts.path + "?" + parts.query, follow=True)


def sign_in(client, kind: str = GrantKind.GOOGLE, capabilities: tuple[str, ...] = ("mail", "calendar")):
    return back(client, consent(start(client, kind, list(capabilities))))


def page_text(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


def run(person, name: str, arguments: dict, seconds: float = 15) -> str:
    """One tool call as the delivery engine makes it, in a fresh toolbox (it reads the accounts as they are)."""
    delivery = Delivery.objects.latest("pk")
    box = toolbox_for(person, delivery, attempt=1)
    box.next_index = Action.objects.filter(delivery=delivery).count()
    return box.call(f"call_{box.next_index}", name, json.dumps(arguments), 1, time.monotonic() + seconds)


# Connecting --------------------------------------------------------------------------------------------------------


def test_connect_google_signs_in_with_pkce_and_connects_mail_and_calendar(client, person, google, oauth, address):
    before = len(oauth.authorize_requests)
    response = sign_in(client)

    text = page_text(response)
    assert response.status_code == 200
    assert f"Connected your Google mail and calendar ({address})" in text
    asked = oauth.authorize_requests[before]
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert (
        asked["access_type"] == "offline"
        and asked["redirect_uri"] == "http://testserver/connections/oauth/google/callback/"
    )
    assert set(asked["scope"].split()) == {
        "openid",
        "email",
        "https://mail.google.com/",
        "https://www.googleapis.com/auth/calendar.events",
    }
    exchanged = oauth.token_requests[-1]
    assert exchanged["grant_type"] == "authorization_code" and len(exchanged["code_verifier"]) >= 43
    mailbox = MailAccount.objects.get(owner=person)
    calendar = CalendarAccount.objects.get(owner=person)
    assert mailbox.address == address and mailbox.password_encrypted == ""
    assert mailbox.oauth_grant_id == calendar.oauth_grant_id
    assert calendar.calendar_url.endswith(f"/{address}/events/") and calendar.calendar_name == "Events"


def test_tokens_are_stored_encrypted_never_in_the_page_or_a_url(client, person, google, oauth):
    response = sign_in(client)
    grant = OAuthGrant.objects.get(owner=person)
    access = crypto.decrypt(grant.access_token_encrypted)
    refresh = crypto.decrypt(grant.refresh_token_encrypted)
    assert oauth.active(access) is not None and refresh.startswith("rt-")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM connections_oauthgrant")
        stored = repr(cursor.fetchall())
    assert access not in stored and refresh not in stored and CLIENT_SECRET not in stored
    assert access not in response.content.decode() and refresh not in response.content.decode()
    assert all(access not in redirect for redirect, _status in response.redirect_chain)


def test_the_assistant_reads_and_sends_mail_and_uses_the_calendar_with_the_token(
    client, person, google, oauth_dovecot, xoauth2_smtp, caldav_server, address
):
    sign_in(client)
    delivery_under_way(person)
    raw = f"From: Sam <sam@example.test>\r\nTo: {address}\r\nSubject: Lunch on Friday?\r\n\r\nHi\r\n"
    oauth_dovecot.deliver(address.split("@")[0], raw.encode())

    assert "Lunch on Friday?" in run(person, "mail_search", {"text": "Lunch"})
    created = run(
        person, "calendar_create_event", {"summary": "Dentist", "start": "2026-12-01T09:00", "end": "2026-12-01T10:00"}
    )
    assert created.startswith("Created the event “Dentist”")
    assert any("Dentist" in event for event in caldav_server.events(address))
    # Sending keeps today's rule: without the person's approval nothing leaves (it asks them).
    sent_before = len(xoauth2_smtp.received)
    told = run(person, "mail_send", {"to": "sam@example.test", "subject": "Hi", "body": "Yes"})
    assert "must approve it first" in told
    assert len(xoauth2_smtp.received) == sent_before


def test_an_expired_access_token_is_refreshed_once_before_use(client, person, google, oauth, address):
    sign_in(client)
    delivery_under_way(person)
    grant = OAuthGrant.objects.get(owner=person)
    old = crypto.decrypt(grant.access_token_encrypted)
    oauth.expire_access_tokens()  # the server says so; our copy of expires_at still says it is fresh
    refreshes = oauth.refreshes

    assert run(person, "mail_search", {"text": "nothing"}) == "No message in the inbox matches."

    assert oauth.refreshes == refreshes + 1  # refused once (401), refreshed once, then served
    fresh = crypto.decrypt(OAuthGrant.objects.get(pk=grant.pk).access_token_encrypted)
    assert fresh != old and oauth.active(fresh) is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite's shared in-memory test database refuses a second writer at once ('database table is locked') "
    "instead of waiting: the race needs PostgreSQL (CI's second pass)",
)
def test_two_workers_racing_spend_the_refresh_token_once(client, person, google, oauth, address):
    """The provider rotates refresh tokens (Microsoft does): had both workers spent the old one, the second would be
    refused and the person asked to sign in again for nothing."""
    oauth.rotate_refresh_tokens = True
    sign_in(client)
    grant = OAuthGrant.objects.get(owner=person)
    account = MailAccount.objects.get(owner=person)
    OAuthGrant.objects.filter(pk=grant.pk).update(expires_at=grant.created_at)  # expired by our clock
    refreshes = oauth.refreshes
    hold = threading.Event()
    oauth.hold_refresh = hold  # the first refresh waits at the server until both workers are in
    results: list[object] = []
    barrier = threading.Barrier(2)

    def worker() -> None:
        try:
            barrier.wait()
            results.append(
                oauth_mail.with_token(
                    grant.pk, grant.kind, lambda token: oauth_mail.mail_server(account, token).oauth_token
                )
            )
        except Exception as error:  # the assertion below shows it
            results.append(error)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    hold.set()
    for thread in threads:
        thread.join(30)
    oauth.hold_refresh = None

    assert len(results) == 2 and isinstance(results[0], str) and results[0] == results[1], results
    assert oauth.refreshes == refreshes + 1
    assert OAuthGrant.objects.get(pk=grant.pk).status == GrantStatus.ACTIVE


def test_a_refused_refresh_marks_sign_in_again_and_the_assistant_says_so(client, person, google, oauth, address):
    sign_in(client)
    delivery_under_way(person)
    oauth.revoke_refresh_tokens()  # the person removed the app's access at Google
    oauth.expire_access_tokens()

    told = run(person, "mail_search", {"text": "x"})

    assert "Sign in again" in told and "Google" in told
    grant = OAuthGrant.objects.get(owner=person)
    assert grant.status == GrantStatus.SIGN_IN_AGAIN
    page = client.get(CONNECTIONS)
    assert "Sign in again with Google" in page_text(page)
    # Signing in again puts the same connection back to work.
    response = sign_in(client, capabilities=("mail", "calendar"))
    assert f"Signed in again with Google as {address}" in page_text(response)
    assert OAuthGrant.objects.get(pk=grant.pk).status == GrantStatus.ACTIVE
    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."


def test_calendar_is_added_later_with_incremental_consent(client, person, google, oauth, address):
    sign_in(client, capabilities=("mail",))
    assert not CalendarAccount.objects.filter(owner=person).exists()
    page = page_text(client.get(CONNECTIONS))
    assert "Add calendar (asks Google for access to it)" in page

    before = len(oauth.authorize_requests)
    response = sign_in(client, capabilities=("calendar",))

    asked = oauth.authorize_requests[before]
    assert asked["include_granted_scopes"] == "true" and asked["login_hint"] == address
    assert "https://mail.google.com/" not in asked["scope"].split()  # only what is new is asked for
    assert f"Connected your Google calendar ({address})" in page_text(response)
    grant = OAuthGrant.objects.get(owner=person)
    assert CalendarAccount.objects.get(owner=person).oauth_grant_id == grant.pk
    assert "https://mail.google.com/" in grant.scope.split()  # the new token kept the mail scope


def test_connect_microsoft_mail_alone_asks_only_for_the_mailbox(client, person, microsoft, oauth, address):
    page = page_text(client.get(CONNECTIONS))
    assert "Connect Microsoft" in page and "default Outlook calendar, reached through Microsoft Graph" in page
    before = len(oauth.authorize_requests)
    response = sign_in(client, GrantKind.MICROSOFT, ("mail",))

    asked = oauth.authorize_requests[before]
    assert asked["tenant"] == "common"
    assert set(asked["scope"].split()) == {
        "openid",
        "email",
        "offline_access",
        "https://outlook.office.com/IMAP.AccessAsUser.All",
        "https://outlook.office.com/SMTP.Send",
    }
    assert f"Connected your Microsoft mail ({address})" in page_text(response)
    assert not CalendarAccount.objects.filter(owner=person).exists()
    assert "Add calendar (asks Microsoft for access to it)" in page_text(client.get(CONNECTIONS))
    delivery_under_way(person)
    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."


def test_an_approved_sending_leaves_through_smtp_with_xoauth2(client, person, google, xoauth2_smtp, address):
    sign_in(client)
    delivery = delivery_under_way(person)
    box = toolbox_for(person, delivery, attempt=1)
    arguments = json.dumps({"to": "sam@example.test", "subject": "Approved", "body": "Yes"})

    told = box.call("approved-1", "mail_send", arguments, 0, time.monotonic() + 15, approved=True)

    assert told.startswith("Sent to sam@example.test")
    assert xoauth2_smtp.received[-1]["Subject"] == "Approved" and xoauth2_smtp.received[-1]["From"] == address
    assert xoauth2_smtp.logins[-1] == address


def test_microsoft_refreshes_with_its_scopes_and_rotating_refresh_tokens(client, person, microsoft, oauth, address):
    sign_in(client, GrantKind.MICROSOFT, ("mail",))
    delivery_under_way(person)
    grant = OAuthGrant.objects.get(owner=person)
    first_refresh = crypto.decrypt(grant.refresh_token_encrypted)
    oauth.expire_access_tokens()

    assert run(person, "mail_search", {"text": "x"}) == "No message in the inbox matches."

    refreshed = oauth.token_requests[-1]
    assert refreshed["grant_type"] == "refresh_token" and "offline_access" in refreshed["scope"].split()
    assert "https://outlook.office.com/IMAP.AccessAsUser.All" in refreshed["scope"].split()
    stored = OAuthGrant.objects.get(pk=grant.pk)
    assert crypto.decrypt(stored.refresh_token_encrypted) != first_refresh  # the rotated one is kept
    assert stored.status == GrantStatus.ACTIVE


def test_short_scope_names_in_the_token_answer_count_as_granted(settings):
    from connections.oauth.providers import microsoft

    settings.MICROSOFT_OAUTH_CLIENT_ID = CLIENT_ID
    found = microsoft()
    assert found is not None
    assert found.granted("IMAP.AccessAsUser.All SMTP.Send openid") == ["mail"]
    assert found.granted("https://outlook.office.com/IMAP.AccessAsUser.All") == []  # sending not granted


def test_a_permission_left_unticked_at_google_is_not_connected_and_said(client, person, google, oauth, address):
    oauth.withheld = {"https://mail.google.com/"}
    response = sign_in(client, capabilities=("mail", "calendar"))
    text = page_text(response)
    assert f"Connected your Google calendar ({address})" in text
    assert "You did not allow mail at Google, so it is not connected" in text
    assert not MailAccount.objects.exists() and CalendarAccount.objects.filter(owner=person).exists()
    assert "Add mail (asks Google for access to it)" in text


# Removing ----------------------------------------------------------------------------------------------------------


def test_disconnecting_google_revokes_the_tokens_and_removes_both(client, person, google, oauth):
    sign_in(client)
    grant = OAuthGrant.objects.get(owner=person)
    access = crypto.decrypt(grant.access_token_encrypted)
    refresh = crypto.decrypt(grant.refresh_token_encrypted)

    response = client.post(reverse("connections:oauth-mail-disconnect", args=["google"]), follow=True)

    assert "the sign-in revoked at Google" in page_text(response)
    assert introspect(oauth, access) == {"active": False}
    assert next(t for t in oauth.tokens if t.refresh_token == refresh).refresh_revoked
    assert not OAuthGrant.objects.exists() and not MailAccount.objects.exists() and not CalendarAccount.objects.exists()


def test_removing_the_mailbox_alone_keeps_the_calendars_sign_in(client, person, google, oauth):
    sign_in(client)
    client.post(reverse("connections:remove-account", args=["mailbox"]))
    assert not MailAccount.objects.exists()
    grant = OAuthGrant.objects.get(owner=person)
    assert CalendarAccount.objects.get(owner=person).oauth_grant_id == grant.pk
    assert oauth.active(crypto.decrypt(grant.access_token_encrypted)) is not None
    client.post(reverse("connections:remove-account", args=["calendar"]))  # the last one: the grant goes, revoked
    assert not OAuthGrant.objects.exists()
    assert oauth.active(crypto.decrypt(grant.access_token_encrypted)) is None


def test_disconnecting_microsoft_deletes_the_tokens_and_says_how_to_withdraw_access(client, person, microsoft, oauth):
    sign_in(client, GrantKind.MICROSOFT, ("mail",))
    response = client.post(reverse("connections:oauth-mail-disconnect", args=["microsoft"]), follow=True)
    text = page_text(response)
    assert "our copy of the sign-in deleted" in text and "myapps.microsoft.com" in text
    assert not OAuthGrant.objects.exists() and not MailAccount.objects.exists()


# Refusals ----------------------------------------------------------------------------------------------------------


def test_a_callback_with_a_foreign_or_reused_state_is_refused_and_nothing_is_exchanged(client, person, google, oauth):
    callback = consent(start(client, "google", ["mail"]))
    tokens_before = len(oauth.token_requests)
    forged = callback.replace("state=", "state=x")
    refused = back(client, forged)
    assert "was not started from this browser" in page_text(refused)
    assert len(oauth.token_requests) == tokens_before

    assert "Connected your Google mail" in page_text(back(client, callback))
    again = back(client, callback)  # the same callback a second time
    assert "already used" in page_text(again)
    assert OAuthGrant.objects.count() == 1


def test_another_persons_callback_is_refused(client, person, google, oauth, django_user_model):
    callback = consent(start(client, "google", ["mail"]))
    other = django_user_model.objects.create_user("mallory", "mallory@example.test", "pw-0123456789")
    client.force_login(other)  # a callback URL sent to someone else's browser
    assert "was not started from this browser" in page_text(back(client, callback))
    assert not OAuthGrant.objects.exists()


def test_declining_at_the_provider_connects_nothing(client, person, google):
    response = back(client, consent(start(client, "google", ["mail", "calendar"]), decision="deny"))
    assert "You declined at Google; nothing was connected." in page_text(response)
    assert not OAuthGrant.objects.exists() and not MailAccount.objects.exists()


def test_a_password_mailbox_must_be_removed_first(client, person, google):
    MailAccount.objects.create(
        owner=person,
        address="me@example.test",
        username="me",
        password_encrypted=crypto.encrypt("pw"),
        imap_host="h",
        imap_port=1,
        imap_security="ssl",
        smtp_host="h",
        smtp_port=1,
        smtp_security="ssl",
    )
    response = client.post(
        reverse("connections:oauth-mail-start", args=["google"]), {"capability": ["mail"]}, follow=True
    )
    assert "You already have a mailbox connected; remove it first." in page_text(response)


def test_an_unconfigured_provider_is_not_offered(client, person, settings):
    settings.GOOGLE_OAUTH_CLIENT_ID = ""
    settings.MICROSOFT_OAUTH_CLIENT_ID = ""
    assert "Connect Google" not in page_text(client.get(CONNECTIONS))
    assert client.post(reverse("connections:oauth-mail-start", args=["google"])).status_code == 404


@contextmanager
def huge_token_endpoint(size: int = 100_000_000) -> Iterator[str]:
    """A token endpoint that answers 200 with ``size`` bytes of JSON-looking text."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            try:
                self.wfile.write(b'{"access_token": "')
                chunk = b"a" * 65536
                for _ in range(size // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                return  # the client hung up: as it should

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        server.server_close()


def test_a_token_endpoint_that_hangs_is_refused_cleanly(client, person, google, settings):
    settings.OAUTH_TIMEOUT_SECONDS = 1
    callback = consent(start(client, "google", ["mail"]))
    with silent_server() as port:
        settings.GOOGLE_OAUTH_TOKEN_URL = f"http://127.0.0.1:{port}/token"
        began = time.monotonic()
        response = back(client, callback)
    assert time.monotonic() - began < 9  # OAUTH_TIMEOUT_SECONDS is 1 here; the default (10) would fail it
    assert "the token endpoint did not answer in time" in page_text(response).lower()
    assert not OAuthGrant.objects.exists() and not MailAccount.objects.exists()


def test_a_token_endpoint_that_answers_100_mb_is_refused_cleanly(client, person, google, settings):
    callback = consent(start(client, "google", ["mail"]))
    with huge_token_endpoint() as url:
        settings.GOOGLE_OAUTH_TOKEN_URL = url
        response = back(client, callback)
    assert response.status_code == 200
    assert "answered more than 1000 kB" in page_text(response)
    assert not OAuthGrant.objects.exists()


def test_a_code_for_another_client_is_refused_and_nothing_stored(client, person, google, oauth):
    authorization = start(client, "google", ["mail"])
    callback = consent(authorization)
    code = parse_qs(urlsplit(callback).query)["code"][0]
    oauth.codes[code].client_id = "someone-else"  # the code was issued to another app
    response = back(client, callback)
    assert "Signing in with Google failed" in page_text(response) and "invalid_grant" in page_text(response)
    assert not OAuthGrant.objects.exists()


def test_removing_through_the_api_revokes_when_the_last_account_goes(client, person, google, oauth, v2):
    sign_in(client)
    grant = OAuthGrant.objects.get(owner=person)
    access = crypto.decrypt(grant.access_token_encrypted)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {v2[1]}"}

    assert client.delete("/api/v1/connections/mailbox", **auth).status_code == 200
    assert oauth.active(access) is not None  # the calendar still uses the sign-in
    assert client.delete("/api/v1/connections/calendar", **auth).status_code == 200
    assert oauth.active(access) is None and not OAuthGrant.objects.exists()
