"""Password reset by email (console/password_reset.py): offered only with an SMTP server configured; the link
opens the account once, for an hour, and never reaches the access log."""

import io
import logging
import re

import pytest
from django.core import mail
from django.core.management import call_command
from django.test import Client

from ops.redaction import RedactResetLinks
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

OLD, NEW = "a long and uncommon passphrase", "another long and uncommon passphrase"


@pytest.fixture
def person():
    user = UserFactory(username="ada@example.com", email="ada@example.com")
    user.set_password(OLD)
    user.save()
    return user


@pytest.fixture
def email_configured(settings):
    """As with EMAIL_HOST set, but the mail stays in django.core.mail.outbox (Django's test email backend)."""
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    settings.PASSWORD_RESET_BY_EMAIL = True


def log_in(client: Client, password: str):
    return client.post("/login/", {"username": "ada@example.com", "password": password})


def reset_link() -> str:
    (sent,) = mail.outbox
    found = re.search(r"http://testserver(/reset/[^\s]+/)", sent.body)
    assert found is not None
    return found[1]


def test_the_whole_reset(client, person, email_configured, caplog):
    assert "Forgot your password?" in client.get("/login/").content.decode()

    response = client.post("/password-reset/", {"email": "Ada@Example.com"})
    assert response.status_code == 302 and response["Location"] == "/password-reset/sent/"
    assert mail.outbox[0].to == ["ada@example.com"]
    link = reset_link()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="access"):
        opened = client.get(link)
    assert opened.status_code == 302 and opened["Location"].endswith("/set-password/")
    token = link.rstrip("/").rsplit("/", 1)[1]
    assert token not in opened["Location"]  # out of the address bar and any Referer from here on
    logged = [getattr(record, "fields", {}).get("path") for record in caplog.records if record.name == "access"]
    assert logged == ["/reset/<uidb64>/<token>/"]
    assert token not in caplog.text

    form = client.get(opened["Location"])
    assert "Choose a new password" in form.content.decode()
    done = client.post(opened["Location"], {"new_password1": NEW, "new_password2": NEW})
    assert done.status_code == 302 and done["Location"] == "/reset/done/"

    assert log_in(Client(), OLD).status_code == 200  # refused: the form again
    assert log_in(Client(), NEW).status_code == 302
    again = Client().get(link, follow=True)
    assert "This link no longer works" in again.content.decode()  # once only


def test_an_unknown_address_gets_the_same_answer_and_no_email(client, person, email_configured):
    response = client.post("/password-reset/", {"email": "nobody@example.com"})

    assert response.status_code == 302 and response["Location"] == "/password-reset/sent/"
    assert mail.outbox == []


def test_reset_requests_are_limited_per_address(client, person, email_configured, settings):
    settings.PASSWORD_RESET_RATE_LIMIT = "2/h"
    for _ in range(2):
        assert client.post("/password-reset/", {"email": "ada@example.com"}).status_code == 302

    refused = client.post("/password-reset/", {"email": "ada@example.com"})

    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many reset requests" in refused.content.decode()
    assert len(mail.outbox) == 2


def test_without_an_smtp_server_no_reset_is_offered(client, person, settings):
    settings.PASSWORD_RESET_BY_EMAIL = False

    assert "Forgot your password?" not in client.get("/login/").content.decode()
    response = client.post("/password-reset/", {"email": "ada@example.com"})
    assert response.status_code == 200
    assert "cannot send email" in response.content.decode()
    assert mail.outbox == []


def test_wherever_a_path_is_recorded_a_reset_link_is_written_as_its_route(person, gunicorn_conf):
    """The app's access log (above), gunicorn's access log and error reports share ops/redaction.py."""
    from datetime import timedelta
    from types import SimpleNamespace

    from django.urls import reverse
    from gunicorn.config import Config

    from ops.redaction import loggable_path
    from ops.sentry import scrub_event

    link = reverse("accounts:password_reset_confirm", kwargs={"uidb64": "MQ", "token": "cz7x8w-0a1b2c3d4e5f"})
    assert loggable_path(link) == "/reset/<uidb64>/<token>/"
    assert loggable_path("/reset/MQ/set-password/") == "/reset/MQ/set-password/"  # no token left in it
    assert loggable_path("/keys/") == "/keys/"

    event = scrub_event({"request": {"url": f"https://ingest.example.com{link}"}}, None)
    assert event["request"]["url"] == "https://ingest.example.com/reset/<uidb64>/<token>/"

    conf = gunicorn_conf()
    environ = {"REQUEST_METHOD": "GET", "RAW_URI": link, "PATH_INFO": link, "SERVER_PROTOCOL": "HTTP/1.1"}
    response = SimpleNamespace(status="302 Found", headers=[], sent=0)
    atoms = conf["logger_class"](Config()).atoms(response, [], environ, timedelta(milliseconds=3))
    assert (atoms["U"], atoms["r"]) == ("/reset/<uidb64>/<token>/", "GET /reset/<uidb64>/<token>/ HTTP/1.1")
    assert "cz7x8w" not in repr(atoms)

    # Log lines that name the path: Django's "Internal Server Error: <path>", gunicorn's "Error handling request".
    record = logging.LogRecord(
        "django.request", logging.ERROR, __file__, 1, "%s: %s", ("Internal Server Error", link), None
    )
    assert RedactResetLinks().filter(record)
    assert record.getMessage() == "Internal Server Error: /reset/<uidb64>/<token>/"
    gunicorn_logger = conf["logger_class"](Config())
    assert any(isinstance(f, RedactResetLinks) for f in gunicorn_logger.error_log.filters)
    conf["on_exit"](None)


def test_the_settings_put_the_redaction_on_every_log_line():
    ours = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]  # not pytest's capture
    assert ours and all(any(isinstance(f, RedactResetLinks) for f in handler.filters) for handler in ours)
    # Django's own handlers (its DEBUG console, mail to ADMINS) get django.request's lines before ours do.
    assert any(isinstance(f, RedactResetLinks) for f in logging.getLogger("django.request").filters)


def test_an_account_made_by_createapikey_can_ask_for_a_reset_too(client, email_configured):
    # The Quick start's account has no usable password; Django's form skips such accounts, so the reset sent nothing
    # and the person had no way into the console.
    call_command("createapikey", email="ada@example.com", name="my-script", stdout=io.StringIO())

    client.post("/password-reset/", {"email": "ada@example.com"})
    opened = client.get(reset_link())
    client.post(opened["Location"], {"new_password1": NEW, "new_password2": NEW})

    assert log_in(Client(), NEW).status_code == 302


def test_an_inactive_account_gets_no_reset_email(client, person, email_configured):
    person.is_active = False
    person.set_unusable_password()
    person.save()

    client.post("/password-reset/", {"email": "ada@example.com"})

    assert mail.outbox == []
