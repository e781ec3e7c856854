"""The mail and calendar clients with an OAuth 2.0 access token instead of a password (connections/mailboxes.py,
connections/calendars.py), against real servers on 127.0.0.1 that check the token with a real authorization
server's introspection endpoint (tests/oauth_server.py, tests/oauth_mail_servers.py): Dovecot's oauth2 passdb for
IMAP with SASL XOAUTH2, aiosmtpd with XOAUTH2 for SMTP, Radicale behind a bearer-checking proxy for CalDAV."""

from datetime import UTC, datetime, timedelta
from email.utils import make_msgid
from zoneinfo import ZoneInfo

import pytest

from connections import calendars, mailboxes
from connections.network import ServiceError
from tests import oauth_mail_servers as peers
from tests.oauth_server import CLIENT_ID, OAuthServer

oauth, oauth_dovecot, xoauth2_smtp, caldav_server = (
    peers.oauth,
    peers.oauth_dovecot,
    peers.xoauth2_smtp,
    peers.caldav_server,
)

ADDRESS = "person@example.com"


def issue(oauth: OAuthServer, user: str, scope: str = "openid email https://mail.google.com/") -> str:
    """An access token the authorization server issued to ``user`` (as if they had signed in)."""
    token = oauth._generate("authorization_code", oauth.clients[CLIENT_ID], scope=scope)

    class Request:
        client = oauth.clients[CLIENT_ID]

    Request.user = user  # type: ignore[attr-defined]
    oauth.save_token(token, Request)  # type: ignore[arg-type]
    return str(token["access_token"])


def server_for(dovecot, smtp, user: str, token: str) -> mailboxes.MailServer:
    return mailboxes.MailServer(
        address=user,
        username=user,
        password="",
        imap_host="127.0.0.1",
        imap_port=dovecot.port,
        imap_security="none",
        smtp_host="127.0.0.1",
        smtp_port=smtp.port,
        smtp_security="none",
        oauth_token=token,
    )


def deliver(dovecot, user: str, subject: str) -> None:
    headers = f"From: Sam <sam@example.test>\r\nTo: {user}\r\nSubject: {subject}\r\nMessage-ID: {make_msgid()}"
    raw = headers + "\r\n\r\nHi\r\n"
    dovecot.deliver(user.split("@")[0], raw.encode())


def test_imap_reads_the_inbox_with_xoauth2(oauth, oauth_dovecot, xoauth2_smtp):
    user = oauth_dovecot.next_user() + "@example.com"
    deliver(oauth_dovecot, user, "Lunch on Friday?")
    server = server_for(oauth_dovecot, xoauth2_smtp, user, issue(oauth, user))
    found, matched = mailboxes.search(server, text="Lunch", seconds=10)
    assert matched == 1 and found[0]["subject"] == "Lunch on Friday?"
    assert "method=XOAUTH2" in (oauth_dovecot.root / "dovecot.log").read_text()


def test_a_token_that_is_not_the_persons_or_expired_is_refused_as_an_authentication_failure(
    oauth, oauth_dovecot, xoauth2_smtp
):
    user = oauth_dovecot.next_user() + "@example.com"
    someone_else = issue(oauth, "someone@example.com")
    with pytest.raises(ServiceError) as refused:
        mailboxes.search(server_for(oauth_dovecot, xoauth2_smtp, user, someone_else), seconds=10)
    assert refused.value.authentication and "token" in str(refused.value)
    assert someone_else not in str(refused.value)


def test_the_check_logs_in_to_both_and_smtp_sends_with_xoauth2(oauth, oauth_dovecot, xoauth2_smtp):
    user = oauth_dovecot.next_user() + "@example.com"
    server = server_for(oauth_dovecot, xoauth2_smtp, user, issue(oauth, user))
    assert mailboxes.check(server, 10) == "Drafts"
    message = mailboxes.compose(server, "sam@example.test", "Hello", "From the assistant")
    mailboxes.send(server, message, seconds=10)
    assert xoauth2_smtp.received[-1]["Subject"] == "Hello"
    assert xoauth2_smtp.logins[-1] == user


def test_smtp_refuses_a_revoked_token_cleanly(oauth, oauth_dovecot, xoauth2_smtp):
    user = oauth_dovecot.next_user() + "@example.com"
    token = issue(oauth, user)
    oauth.token(token).access_revoked = True
    server = server_for(oauth_dovecot, xoauth2_smtp, user, token)
    before = xoauth2_smtp.refused
    with pytest.raises(ServiceError) as refused:
        mailboxes.send(server, mailboxes.compose(server, "sam@example.test", "Hi", "x"), seconds=10)
    assert refused.value.authentication
    assert str(refused.value) == "The SMTP server refused the sign-in token."
    assert xoauth2_smtp.refused == before + 1


def test_the_token_is_not_in_the_servers_repr():
    server = server_for(type("D", (), {"port": 1})(), type("S", (), {"port": 2})(), ADDRESS, "at-secret-token")
    assert "at-secret-token" not in repr(server)
    calendar = calendars.CalendarServer(url="https://x.test/", username="", password="", bearer="at-secret-token")
    assert "at-secret-token" not in repr(calendar)


def test_caldav_with_a_bearer_token_checks_creates_and_lists_events(oauth, caldav_server):
    caldav_server.make_calendar(ADDRESS, "Person's events")
    token = issue(oauth, ADDRESS, "openid email https://www.googleapis.com/auth/calendar")
    server = calendars.CalendarServer(
        url=caldav_server.url,
        username=ADDRESS,
        password="",
        calendar_url=caldav_server.calendar_url(ADDRESS),
        bearer=token,
    )
    url, name = calendars.check(server, 10)
    assert url == caldav_server.calendar_url(ADDRESS) and name == "Person's events"
    start = datetime(2026, 12, 1, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
    new = calendars.NewEvent("Dentist", start, start + timedelta(hours=1), "", "", ZoneInfo("Europe/Paris"))
    uid = calendars.create_event(server, new, 10)
    events, unreadable = calendars.list_events(
        server, start.astimezone(UTC) - timedelta(days=1), start.astimezone(UTC) + timedelta(days=1), 10
    )
    assert [(e.uid, e.summary) for e in events] == [(uid, "Dentist")] and unreadable == 0
    assert set(caldav_server.tokens_seen) == {token}


def test_caldav_refuses_an_expired_bearer_token_as_an_authentication_failure(oauth, caldav_server):
    caldav_server.make_calendar(ADDRESS)
    token = issue(oauth, ADDRESS)
    oauth.token(token).issued_at -= 7200
    server = calendars.CalendarServer(
        url=caldav_server.url,
        username=ADDRESS,
        password="",
        calendar_url=caldav_server.calendar_url(ADDRESS),
        bearer=token,
    )
    with pytest.raises(ServiceError) as refused:
        calendars.check(server, 10)
    assert refused.value.authentication and str(refused.value) == "The CalDAV server refused the sign-in token."
