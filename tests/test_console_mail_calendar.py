"""The Connections page: connecting a calendar and a mailbox with the console's forms (against Radicale, Dovecot and
aiosmtpd on 127.0.0.1), refusals shown on the page, passwords never shown back, CSRF, escaping, removal."""

import caldav
import pytest
from django.test import Client

from connections.models import CalendarAccount, MailAccount
from tests.factories import UserFactory
from tests.mail_servers import PASSWORD

pytestmark = pytest.mark.django_db

PAGE = "/connections/"


@pytest.fixture
def person(client):
    user = UserFactory(email="ann@example.com")
    client.force_login(user)
    return user


def mailbox_form(dovecot_server, smtp_server, user: str, **changes) -> dict:
    return {
        "address": f"{user}@example.test",
        "username": user,
        "password": PASSWORD,
        "imap_host": "127.0.0.1",
        "imap_port": dovecot_server.port,
        "imap_security": "none",
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp_server.port,
        "smtp_security": "none",
        **changes,
    }


def test_the_page_offers_a_calendar_and_a_mailbox_beside_the_mcp_servers(client, person):
    page = client.get(PAGE).content.decode()
    assert 'action="/connections/calendar/"' in page and 'action="/connections/mailbox/"' in page
    assert "MCP servers" in page and 'name="imap_security"' in page
    assert 'type="password"' in page and 'autocomplete="new-password"' in page


def test_a_calendar_is_connected_from_the_form_and_its_password_never_shown(client, person, radicale_server):
    response = client.post(
        "/connections/calendar/", {"server_url": radicale_server.url, "username": "ann", "password": PASSWORD}
    )
    assert response.status_code == 302 and response.url == PAGE
    page = client.get(PAGE).content.decode()
    assert "Connected your calendar “Personal”" in page
    assert radicale_server.url in page and "Remove calendar" in page
    assert PASSWORD not in page and CalendarAccount.objects.get().owner == person
    assert 'action="/connections/calendar/"' not in page  # one calendar: the form is gone


def test_a_wrong_password_is_said_on_the_page_and_not_echoed_back(client, person, radicale_server):
    response = client.post(
        "/connections/calendar/", {"server_url": radicale_server.url, "username": "ann", "password": "wrong-secret"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "refused the username or password" in page
    assert "wrong-secret" not in page and radicale_server.url in page  # the URL is kept, the password is not
    assert not CalendarAccount.objects.exists()


def test_what_the_server_calls_things_is_escaped(client, person, radicale_server):
    client_dav = caldav.DAVClient(url=radicale_server.url, username="ann", password=PASSWORD)
    client_dav.principal().calendars()[0].set_properties([caldav.elements.dav.DisplayName("<script>alert(1)</script>")])
    client.post("/connections/calendar/", {"server_url": radicale_server.url, "username": "ann", "password": PASSWORD})
    page = client.get(PAGE).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_forms_need_the_csrf_token(person, radicale_server, dovecot_server, smtp_server, mail_user):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(person)
    calendar = strict.post(
        "/connections/calendar/", {"server_url": radicale_server.url, "username": "ann", "password": PASSWORD}
    )
    mailbox = strict.post("/connections/mailbox/", mailbox_form(dovecot_server, smtp_server, mail_user))
    assert (calendar.status_code, mailbox.status_code) == (403, 403)
    assert not CalendarAccount.objects.exists() and not MailAccount.objects.exists()


def test_the_pages_need_a_login(client):
    for path in (PAGE, "/connections/calendar/remove-account/"):
        response = client.get(path)
        assert response.status_code == 302 and "/login/" in response.url
    assert client.post("/connections/calendar/", {}).status_code == 302


def test_a_mailbox_is_connected_shown_and_removed(client, person, dovecot_server, smtp_server, mail_user):
    response = client.post("/connections/mailbox/", mailbox_form(dovecot_server, smtp_server, mail_user))
    assert response.status_code == 302
    page = client.get(PAGE).content.decode()
    assert f"{mail_user}@example.test" in page and f"127.0.0.1:{dovecot_server.port}" in page
    assert PASSWORD not in page and "sends nothing without your approval" in page

    confirm = client.get("/connections/mailbox/remove-account/")
    assert confirm.status_code == 200 and "Remove your mailbox?" in confirm.content.decode()
    assert MailAccount.objects.exists()
    assert client.post("/connections/mailbox/remove-account/").status_code == 302
    assert not MailAccount.objects.exists()
    assert client.post("/connections/mailbox/remove-account/").status_code == 404
    assert client.get("/connections/nothing/remove-account/").status_code == 404


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"password": "wrong-secret"}, "refused the username or password"),
        ({"imap_security": "starttls"}, "does not offer STARTTLS"),
        ({"imap_port": "0"}, "greater than or equal to 1"),
        ({"address": "nope"}, "valid email address"),
    ],
)
def test_a_mailbox_that_cannot_be_used_is_refused_on_the_page(
    client, person, dovecot_server, smtp_server, mail_user, change, expected
):
    response = client.post("/connections/mailbox/", mailbox_form(dovecot_server, smtp_server, mail_user, **change))
    assert response.status_code == 400
    page = response.content.decode()
    assert expected in page and "wrong-secret" not in page and PASSWORD not in page
    assert not MailAccount.objects.exists()


def test_a_second_calendar_is_refused(client, person, radicale_server):
    form = {"server_url": radicale_server.url, "username": "ann", "password": PASSWORD}
    client.post("/connections/calendar/", form)
    again = client.post("/connections/calendar/", form)
    assert again.status_code == 409 and "already have a calendar" in again.content.decode()
    assert CalendarAccount.objects.count() == 1
