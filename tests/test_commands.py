"""The operator commands createapikey and revokeapikey."""

import io
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from keys import tokens
from keys.models import ApiKey, Generation

pytestmark = pytest.mark.django_db


def run(*args: str, stderr: io.StringIO | None = None) -> list[str]:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=stderr or io.StringIO())
    return out.getvalue().strip().splitlines()


def test_createapikey_creates_the_user_and_prints_the_key_last():
    lines = run("createapikey", "--email", "ada@example.com", "--name", "backup script")

    plaintext = lines[-1]
    key = ApiKey.objects.get()
    assert tokens.digest(plaintext) == key.digest
    assert key.generation == Generation.V2
    assert key.name == "backup script"
    assert key.owner.email == "ada@example.com"


def set_password_link(lines: list[str]) -> str:
    (link,) = [line.strip() for line in lines if "/reset/" in line]
    return link


def test_createapikey_prints_a_one_time_link_to_set_the_new_account_s_password(settings):
    # The Quick start's account had no password and no way to get one: the console refused it everywhere.
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    terminal = io.StringIO()
    lines = run("createapikey", "--email", "ada@example.com", "--name", "my-script", stderr=terminal)

    assert lines[-1].startswith("psk_"), "the key stays the last line (the Quick start reads it with tail -n 1)"
    assert not [line for line in lines if "/reset/" in line], "on the terminal, not in what $(…) captures"
    link = set_password_link(terminal.getvalue().splitlines())
    assert link.startswith("http://127.0.0.1:8000/reset/")
    browser = Client()
    opened = browser.get(link.removeprefix("http://127.0.0.1:8000"))
    assert opened.status_code == 302
    password = "a long and uncommon passphrase"
    done = browser.post(opened["Location"], {"new_password1": password, "new_password2": password})
    assert done.status_code == 302

    assert Client().post("/login/", {"username": "ada@example.com", "password": password}).status_code == 302
    assert Client().get(link.removeprefix("http://127.0.0.1:8000"), follow=True).status_code == 200
    again = Client().get(link.removeprefix("http://127.0.0.1:8000"), follow=True).content.decode()
    assert "This link no longer works" in again, "once only"


def test_createapikey_prints_no_link_for_an_account_that_has_a_password():
    user = get_user_model().objects.create_user(username="ada@example.com", email="ada@example.com", password="x" * 20)
    terminal = io.StringIO()
    lines = run("createapikey", "--email", user.email, "--name", "second", stderr=terminal)

    assert not [line for line in lines + terminal.getvalue().splitlines() if "/reset/" in line]


def test_createapikey_reuses_the_user_and_sets_contact_details():
    run("createapikey", "--email", "ada@example.com", "--name", "one")
    lines = run(
        "createapikey",
        "--email",
        "ada@example.com",
        "--name",
        "old",
        "--generation",
        "v1",
        "--phone",
        "+447911123456",
        "--channel",
        "imessage",
    )

    assert get_user_model().objects.count() == 1
    assert lines[-1].startswith("pk_")
    profile = get_user_model().objects.get().profile
    assert (profile.phone_number, profile.channel) == ("+447911123456", "imessage")


@pytest.mark.parametrize(
    "args",
    [
        ["--email", "not-an-email", "--name", "x"],
        ["--email", "a@example.com", "--name", "  "],
        ["--email", "a@example.com", "--name", "x", "--phone", "0791 112 3456"],
        ["--email", "a@example.com", "--name", "x", "--phone", "+1 415 555 1234"],
        ["--email", "a@example.com", "--name", "x" * 101],  # over the column (on PostgreSQL a DataError)
        ["--email", "a@example.com", "--name", "a\x00b"],  # a NUL (PostgreSQL cannot store it)
    ],
)
def test_createapikey_refuses_bad_input_and_creates_nothing(args):
    with pytest.raises(CommandError):
        run("createapikey", *args)
    assert not ApiKey.objects.exists()
    assert not get_user_model().objects.exists()


def test_revokeapikey_revokes_and_names_the_key_by_hint_only():
    plaintext = run("createapikey", "--email", "ada@example.com", "--name", "leaky")[-1]

    output = "\n".join(run("revokeapikey", "--key", plaintext))

    assert ApiKey.objects.get().is_revoked
    assert "leaky" in output and "ada@example.com" in output and plaintext[-4:] in output
    assert plaintext not in output
    assert "already revoked" in "\n".join(run("revokeapikey", "--key", plaintext))


def test_revokeapikey_reads_the_key_from_stdin(monkeypatch):
    plaintext = run("createapikey", "--email", "ada@example.com", "--name", "leaky")[-1]
    monkeypatch.setattr(sys, "stdin", io.StringIO(plaintext + "\n"))
    run("revokeapikey", "--key", "-")
    assert ApiKey.objects.get().is_revoked


def test_revokeapikey_reports_an_unknown_key():
    with pytest.raises(CommandError, match="No API key"):
        run("revokeapikey", "--key", tokens.generate(Generation.V2))
