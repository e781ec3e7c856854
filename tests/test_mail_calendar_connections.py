"""Connecting a calendar (CalDAV) and a mailbox (IMAP + SMTP) through the API, against real servers on 127.0.0.1:
checked when added (wrong password, unreachable, no TLS, private address), stored encrypted, never shown back."""

import io
import time

import pytest
from django.core.management import call_command

from connections import crypto
from connections.models import CalendarAccount, MailAccount
from tests.mail_servers import PASSWORD, free_port, silent_server, trickling_server

pytestmark = pytest.mark.django_db

CALENDAR = "/api/v1/connections/calendar"
MAILBOX = "/api/v1/connections/mailbox"
# What a loaded 2-core machine may add to a deadline before the waiting thread runs again. The hanging and trickling
# servers hold a client for minutes without a bound, so a deadline kept still shows within this much.
SLACK = 3


def mailbox_fields(dovecot_server, smtp_server, user: str, **changes) -> dict:
    fields = {
        "address": f"{user}@example.test",
        "username": user,
        "password": PASSWORD,
        "imapHost": "127.0.0.1",
        "imapPort": dovecot_server.port,
        "imapSecurity": "none",
        "smtpHost": "127.0.0.1",
        "smtpPort": smtp_server.port,
        "smtpSecurity": "none",
    }
    return {**fields, **changes}


def api(client, method: str, path: str, key: str, body=None):
    return getattr(client, method)(path, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")


def test_a_calendar_is_connected_listed_and_removed_and_its_password_never_shown(client, v2, radicale_server):
    response = api(
        client, "post", CALENDAR, v2[1], {"serverUrl": radicale_server.url, "username": "ann", "password": PASSWORD}
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["calendarName"] == "Personal" and body["calendarUrl"].endswith("/ann/personal/")
    assert PASSWORD not in response.content.decode()

    account = CalendarAccount.objects.get()
    assert PASSWORD not in account.password_encrypted and crypto.decrypt(account.password_encrypted) == PASSWORD

    listed = api(client, "get", CALENDAR, v2[1])
    assert listed.json()["calendar"]["id"] == account.public_id and PASSWORD not in listed.content.decode()

    again = api(
        client, "post", CALENDAR, v2[1], {"serverUrl": radicale_server.url, "username": "ann", "password": PASSWORD}
    )
    assert (again.status_code, again.json()["code"]) == (409, "connection_exists")

    assert api(client, "delete", CALENDAR, v2[1]).status_code == 200
    assert api(client, "get", CALENDAR, v2[1]).json()["calendar"] is None
    assert api(client, "delete", CALENDAR, v2[1]).status_code == 404


@pytest.mark.parametrize(
    ("change", "status", "code", "text"),
    [
        ({"password": "wrong"}, 422, "mail_calendar_login_refused", "refused the username or password"),
        ({"serverUrl": "ftp://example.com/"}, 400, "invalid_body", "https://"),
        ({"serverUrl": "https://user:pw@example.com/"}, 400, "invalid_body", "not in the URL"),
        ({"username": ""}, 400, "invalid_body", "username"),
        ({"password": None}, 400, "invalid_body", "password"),
    ],
)
def test_a_calendar_that_cannot_be_used_is_refused_and_nothing_stored(
    client, v2, radicale_server, change, status, code, text
):
    body = {"serverUrl": radicale_server.url, "username": "ann", "password": PASSWORD, **change}
    response = api(client, "post", CALENDAR, v2[1], body)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert text in response.json()["message"]
    assert "wrong" not in response.json()["message"] or change.get("password") != "wrong"
    assert not CalendarAccount.objects.exists()


def test_unreachable_hanging_plaintext_and_private_calendar_servers_are_refused(client, v2, settings):
    settings.MCP_CHECK_TIMEOUT_SECONDS = 1
    down = api(
        client,
        "post",
        CALENDAR,
        v2[1],
        {"serverUrl": f"http://127.0.0.1:{free_port()}/", "username": "a", "password": "b"},
    )
    assert (down.status_code, down.json()["code"]) == (422, "mail_calendar_unusable")
    assert "Could not connect" in down.json()["message"]

    with silent_server() as port:
        hung = api(
            client,
            "post",
            CALENDAR,
            v2[1],
            {"serverUrl": f"http://127.0.0.1:{port}/", "username": "a", "password": "b"},
        )
    assert hung.status_code == 422 and "did not answer in time" in hung.json()["message"]

    settings.MAIL_CALENDAR_ALLOW_PLAINTEXT = False
    plain = api(client, "post", CALENDAR, v2[1], {"serverUrl": "http://127.0.0.1:1/", "username": "a", "password": "b"})
    assert plain.status_code == 400 and "https://" in plain.json()["message"]

    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False
    private = api(
        client, "post", CALENDAR, v2[1], {"serverUrl": "https://127.0.0.1:1/", "username": "a", "password": "b"}
    )
    assert private.status_code == 422 and "private, loopback or link-local" in private.json()["message"]
    assert not CalendarAccount.objects.exists()


def test_a_mailbox_is_connected_after_logging_in_to_both_servers(client, v2, dovecot_server, smtp_server, mail_user):
    response = api(client, "post", MAILBOX, v2[1], mailbox_fields(dovecot_server, smtp_server, mail_user))
    assert response.status_code == 201, response.json()
    assert response.json()["draftsFolder"] == "Drafts" and PASSWORD not in response.content.decode()
    account = MailAccount.objects.get()
    assert (account.imap_port, account.smtp_security) == (dovecot_server.port, "none")
    assert PASSWORD not in account.password_encrypted
    listed = api(client, "get", MAILBOX, v2[1]).json()["mailbox"]
    assert listed["address"] == f"{mail_user}@example.test" and "password" not in listed
    assert api(client, "delete", MAILBOX, v2[1]).status_code == 200
    assert not MailAccount.objects.exists()


@pytest.mark.parametrize(
    ("change", "status", "code", "text"),
    [
        ({"password": "wrong"}, 422, "mail_calendar_login_refused", "refused the username or password"),
        ({"imapSecurity": "starttls"}, 422, "mail_calendar_unusable", "does not offer STARTTLS"),
        ({"imapSecurity": "ssl"}, 422, "mail_calendar_unusable", "TLS with the IMAP server"),
        ({"smtpSecurity": "starttls"}, 422, "mail_calendar_unusable", "does not offer STARTTLS"),
        ({"imapSecurity": "sometimes"}, 400, "invalid_body", "must be one of ssl, starttls, none"),
        ({"imapPort": 70000}, 400, "invalid_body", "port number"),
        ({"imapPort": True}, 400, "invalid_body", "port number"),
        ({"imapHost": "imap://example.com/x"}, 400, "invalid_body", "bare host name"),
        ({"address": "not-an-address"}, 400, "invalid_body", "email address"),
    ],
)
def test_a_mailbox_that_cannot_be_used_is_refused(
    client, v2, dovecot_server, smtp_server, mail_user, change, status, code, text
):
    response = api(client, "post", MAILBOX, v2[1], mailbox_fields(dovecot_server, smtp_server, mail_user, **change))
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert text in response.json()["message"]
    assert not MailAccount.objects.exists()


def test_a_mailbox_without_tls_or_at_a_private_address_is_refused_unless_allowed(
    client, v2, dovecot_server, smtp_server, mail_user, settings
):
    settings.MAIL_CALENDAR_ALLOW_PLAINTEXT = False
    plain = api(client, "post", MAILBOX, v2[1], mailbox_fields(dovecot_server, smtp_server, mail_user))
    assert plain.status_code == 400 and "unencrypted" in plain.json()["message"]

    settings.MAIL_CALENDAR_ALLOW_PLAINTEXT = True
    settings.MCP_ALLOW_PRIVATE_ADDRESSES = False
    private = api(client, "post", MAILBOX, v2[1], mailbox_fields(dovecot_server, smtp_server, mail_user))
    assert private.status_code == 422 and "private, loopback or link-local" in private.json()["message"]
    assert not MailAccount.objects.exists()


def test_a_mailbox_server_that_hangs_is_refused_in_time(client, v2, smtp_server, settings):
    settings.MCP_CHECK_TIMEOUT_SECONDS = 1
    with silent_server() as port:
        response = api(client, "post", MAILBOX, v2[1], mailbox_fields(type("D", (), {"port": port}), smtp_server, "x"))
    assert response.status_code == 422 and "did not answer in time" in response.json()["message"]


def test_an_smtp_server_that_answers_a_byte_at_a_time_is_refused_in_time(
    client, v2, dovecot_server, smtp_server, mail_user, settings
):
    settings.MCP_CHECK_TIMEOUT_SECONDS = 1.5
    api(client, "get", MAILBOX, v2[1])  # the first request of a process loads the URLs: not what is timed here
    with trickling_server(b"220 mail.example ESMTP almost ready\r\n") as port:
        started = time.monotonic()
        response = api(
            client, "post", MAILBOX, v2[1], mailbox_fields(dovecot_server, smtp_server, mail_user, smtpPort=port)
        )
        took = time.monotonic() - started
    assert response.status_code == 422 and "SMTP server 127.0.0.1 did not answer in time" in response.json()["message"]
    assert took < 1.5 + SLACK


def test_the_api_needs_a_v2_key(client, v1):
    response = api(client, "get", CALENDAR, v1[1])
    assert response.status_code == 401


def test_rotatemcpkeys_reencrypts_calendar_and_mailbox_passwords(settings, user):
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.MCP_ENCRYPTION_KEYS = [old]
    calendar = CalendarAccount.objects.create(
        owner=user,
        server_url="https://c.example/",
        username="a",
        password_encrypted=crypto.encrypt("cal-pw"),
        calendar_url="https://c.example/a/",
    )
    mailbox = MailAccount.objects.create(
        owner=user,
        address="a@example.test",
        username="a",
        password_encrypted=crypto.encrypt("mail-pw"),
        imap_host="i.example",
        imap_port=993,
        imap_security="ssl",
        smtp_host="s.example",
        smtp_port=465,
        smtp_security="ssl",
    )
    settings.MCP_ENCRYPTION_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotatemcpkeys", stdout=out)
    assert "Re-encrypted 2 secret(s)" in out.getvalue()
    settings.MCP_ENCRYPTION_KEYS = [new]
    calendar.refresh_from_db()
    mailbox.refresh_from_db()
    assert crypto.decrypt(calendar.password_encrypted) == "cal-pw"
    assert crypto.decrypt(mailbox.password_encrypted) == "mail-pw"


def test_staff_see_the_accounts_in_the_admin_without_their_passwords(client, v2, radicale_server):
    from tests.factories import UserFactory

    api(client, "post", CALENDAR, v2[1], {"serverUrl": radicale_server.url, "username": "ann", "password": PASSWORD})
    account = CalendarAccount.objects.get()
    client.force_login(UserFactory(email="staff@example.com", is_staff=True, is_superuser=True))

    page = client.get(f"/admin/connections/calendaraccount/{account.pk}/change/").content.decode()
    assert radicale_server.url in page and "Personal" in page
    assert PASSWORD not in page and account.password_encrypted not in page
    assert client.get("/admin/connections/mailaccount/").status_code == 200
    refused = client.get("/admin/connections/calendaraccount/?password_encrypted__startswith=g")
    assert refused.status_code in (302, 400)


def test_a_calendar_answer_that_says_it_is_huge_is_not_read(client, v2):
    """A "CalDAV server" announcing 50 MB: refused on its Content-Length, before the body is read."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Huge(BaseHTTPRequestHandler):
        def do_PROPFIND(self):
            self.send_response(207)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(50_000_000))
            self.end_headers()
            try:
                for _ in range(5_000):
                    self.wfile.write(b"x" * 10_000)
            except OSError:
                pass  # the client hung up: what the test expects

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        body = {"serverUrl": f"http://127.0.0.1:{server.server_address[1]}/", "username": "a", "password": "b"}
        response = api(client, "post", CALENDAR, v2[1], body)
    finally:
        server.shutdown()
        server.server_close()
    assert response.status_code == 422 and "larger than 10 MB" in response.json()["message"]
    assert not CalendarAccount.objects.exists()
