"""Sign-up does not tell whether an address has an account (issue 18 item 15), where sign-ups are confirmed by email
(SIGNUP_EMAIL_CONFIRMATION, on with an SMTP server): the page answers the same, after the same work, for a new address
and for one with an account; only the email differs."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.tasks import default_task_backend
from django.test import Client

from console.signup_confirmation import send_signup_email
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "a long and uncommon passphrase"


@pytest.fixture
def confirmation(settings):
    settings.SIGNUP_EMAIL_CONFIRMATION = True
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}


def sign_up(client: Client, email: str):
    return client.post(
        "/signup/",
        {
            "email": email,
            "password1": PASSWORD,
            "password2": PASSWORD,
            "phone_number": "+14155550100",
            "channel": "sms",
        },
    )


def link_in(body: str) -> str:
    found = re.search(r"http://testserver(/signup/confirm/\?token=\S+)", body)
    assert found is not None, body
    return found[1]


def test_the_page_answers_the_same_for_a_new_address_and_one_with_an_account(client, confirmation, settings):
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    default_task_backend.clear()
    UserFactory(username="ada@example.com", email="ada@example.com")

    answers = [sign_up(Client(), email) for email in ("ada@example.com", "new@example.com")]

    assert [(a.status_code, a["Location"]) for a in answers] == [(302, "/signup/sent/")] * 2
    assert mail.outbox == []  # nothing looked up or sent on the request path: one task each, the same task
    assert [r.task.func for r in default_task_backend.results] == [send_signup_email.func] * 2
    assert get_user_model().objects.count() == 1
    default_task_backend.clear()


def test_a_new_address_gets_a_link_that_creates_the_account_once(client, confirmation):
    assert sign_up(client, "new@example.com")["Location"] == "/signup/sent/"
    (sent,) = mail.outbox
    assert sent.to == ["new@example.com"]
    link = link_in(sent.body)
    assert not get_user_model().objects.filter(email="new@example.com").exists()

    page = client.get(link)  # a mail scanner fetching the link creates nothing
    assert "Create my account" in page.content.decode()
    assert not get_user_model().objects.filter(email="new@example.com").exists()

    token = link.split("token=")[1]
    created = client.post("/signup/confirm/", {"token": token})
    assert created.status_code == 302
    user = get_user_model().objects.get(email="new@example.com")
    assert user.check_password(PASSWORD)
    assert user.profile.phone_number == "+14155550100"
    assert client.get("/keys/").status_code == 200  # logged in

    again = Client().post("/signup/confirm/", {"token": token})
    assert again.status_code == 410


def test_an_address_with_an_account_gets_a_note_instead(client, confirmation):
    owner = UserFactory(username="ada@example.com", email="ada@example.com")
    sign_up(client, "Ada@Example.com")

    (sent,) = mail.outbox
    assert "already has" in sent.body
    assert "/signup/confirm/" not in sent.body
    assert "/password-reset/" in sent.body
    owner.refresh_from_db()
    assert not owner.check_password(PASSWORD)  # nothing changed


def test_without_confirmation_the_page_still_says_so(client, settings):
    settings.SIGNUP_EMAIL_CONFIRMATION = False  # development: no email to confirm with
    UserFactory(username="ada@example.com", email="ada@example.com")
    assert "already exists" in sign_up(client, "ada@example.com").content.decode()
