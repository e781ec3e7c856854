"""console/login_limits.py: failed log-ins per client address, for the console's log-in page and the admin's."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "a long and uncommon passphrase"
CONSOLE_LOGIN = "/login/"
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture
def person(settings):
    settings.LOGIN_FAILURE_RATE_LIMIT = "3/15m"
    user = UserFactory(username="ada@example.com", email="ada@example.com")
    user.set_password(PASSWORD)
    user.save()
    return user


def log_in(client: Client, password: str, path: str = CONSOLE_LOGIN):
    return client.post(path, {"username": "ada@example.com", "password": password})


def test_after_the_limit_every_log_in_from_the_address_is_refused_even_with_the_right_password(client, person):
    for _ in range(3):
        assert log_in(client, "a guess").status_code == 200  # the form again, with its error

    refused = log_in(client, PASSWORD)

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 15 * 60
    assert "Too many failed log-ins" in refused.content.decode()
    wait_minutes = (int(refused["Retry-After"]) + 59) // 60  # the rest of the window, in whole minutes
    assert f"in {wait_minutes} minute" in refused.content.decode()
    assert client.get("/keys/").status_code == 302  # not logged in


def test_under_the_limit_the_right_password_still_works(client, person):
    for _ in range(2):
        log_in(client, "a guess")

    assert log_in(client, PASSWORD).status_code == 302


def test_another_address_is_not_affected(person):
    here, elsewhere = Client(REMOTE_ADDR="203.0.113.7"), Client(REMOTE_ADDR="198.51.100.9")
    for _ in range(3):
        log_in(here, "a guess")

    assert log_in(here, PASSWORD).status_code == 429
    assert log_in(elsewhere, PASSWORD).status_code == 302


def test_unknown_emails_count_too(client, person):
    for n in range(3):
        client.post(CONSOLE_LOGIN, {"username": f"nobody{n}@example.com", "password": "a guess"})

    assert log_in(client, PASSWORD).status_code == 429


def test_the_admin_s_log_in_counts_and_is_refused_alike(client, person):
    person.is_staff = True
    person.save()
    for _ in range(3):
        assert log_in(client, "a guess", ADMIN_LOGIN).status_code == 200

    assert log_in(client, PASSWORD, ADMIN_LOGIN).status_code == 429
    assert log_in(client, PASSWORD, CONSOLE_LOGIN).status_code == 429  # one count for both pages


def test_the_log_in_page_itself_still_shows(client, person):
    for _ in range(3):
        log_in(client, "a guess")

    assert client.get(CONSOLE_LOGIN).status_code == 200


def test_with_rate_limits_off_nothing_is_counted(client, person, settings):
    settings.RATELIMIT_ENABLE = False
    for _ in range(5):
        log_in(client, "a guess")

    assert log_in(client, PASSWORD).status_code == 302
    assert get_user_model().objects.get().last_login is not None
