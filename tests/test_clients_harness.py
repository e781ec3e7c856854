"""The harness for the official clients works: the npm CLI runs from tests/clients in an isolated home, reaches the
live server, and reads errors the way it does against Poke; the PyPI SDK finds its key in the same home."""

import json

import pytest
from poke import AuthenticationError, Poke

from conversations.models import Message, Role
from tests.factories import make_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cli_is_the_pinned_one_and_runs(poke_cli):
    done = poke_cli.run("--help")
    assert done.returncode == 0
    assert "login" in done.stdout and "whoami" in done.stdout


def test_the_cli_without_credentials_says_so_and_touches_nothing(poke_cli, poke_home):
    done = poke_cli.run("whoami")
    assert done.returncode == 1
    assert "Not logged in" in done.stderr
    assert poke_home.credentials() is None


def test_logout_deletes_the_credentials_file(poke_cli, poke_home):
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": "psk_anything"}))
    done = poke_cli.run("logout")
    assert done.returncode == 0
    assert "Logged out." in done.stdout
    assert poke_home.credentials() is None


def test_the_sdk_takes_its_key_from_the_credentials_file(poke_sdk_env, poke_home):
    _, plaintext = make_key()
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": plaintext}))

    result = Poke().send_message("Water the plants at 6pm")

    assert result["success"] is True
    assert Message.objects.get(role=Role.USER).text == "Water the plants at 6pm"


def test_the_sdk_with_a_wrong_stored_token_gets_the_authentication_error(poke_sdk_env, poke_home):
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": "psk_" + "y" * 38}))
    with pytest.raises(AuthenticationError):
        Poke().send_message("hi")
    assert not Message.objects.exists()
