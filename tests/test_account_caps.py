"""Caps per account and per client address (issue 18 item 14): active keys per account (MAX_ACTIVE_KEYS_PER_ACCOUNT),
sign-ups per client address (SIGNUP_RATE_LIMIT). Both are settings; reaching one is a clear answer, never a 500."""

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from keys.models import ApiKey, Generation
from keys.services import KeyLimitReached, create_key, revoke_key
from tests.console import DEFAULT_SCOPES, form_nonce
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def cap(settings):
    settings.MAX_ACTIVE_KEYS_PER_ACCOUNT = 3
    return 3


def test_an_account_holds_at_most_the_cap_of_active_keys(user, cap):
    for n in range(cap):
        make_key(user, f"key {n}")

    with pytest.raises(KeyLimitReached, match="Revoke a key"):
        create_key(user, "one too many")

    assert ApiKey.objects.filter(owner=user).count() == cap
    assert make_key(UserFactory(), "someone else's")[0].pk  # per account


def test_revoking_a_key_makes_room_and_v1_keys_count_too(user, cap):
    keys = [make_key(user, "v2")[0], make_key(user, "v2 again")[0], make_key(user, "legacy", Generation.V1)[0]]
    with pytest.raises(KeyLimitReached):
        create_key(user, "full", Generation.V1)

    revoke_key(keys[0])

    assert create_key(user, "room again")[0].pk


def test_the_console_says_why_no_key_was_created(client, user, cap):
    for n in range(cap):
        make_key(user, f"key {n}")
    client.force_login(user)

    page = client.post(
        "/keys/new/", {"name": "deploy bot", "nonce": form_nonce(client, "/keys/new/"), **DEFAULT_SCOPES}
    )

    assert page.status_code == 200
    assert "3 active API keys" in page.content.decode()
    assert not ApiKey.objects.filter(name="deploy bot").exists()


def test_the_legacy_key_form_says_it_too(client, user, cap):
    for n in range(cap):
        make_key(user, f"key {n}")
    client.force_login(user)

    page = client.post(
        "/settings/advanced/legacy-key/", {"name": "old", "nonce": form_nonce(client, "/settings/advanced/")}
    )

    assert page.status_code == 200 and "active API keys" in page.content.decode()


def test_createapikey_refuses_with_the_reason(user, cap):
    for n in range(cap):
        make_key(user, f"key {n}")
    with pytest.raises(CommandError, match="active API keys"):
        call_command("createapikey", email=user.email, name="more")


def sign_up(client: Client, n: int):
    return client.post(
        "/signup/",
        {
            "email": f"new{n}@example.com",
            "password1": "a long and uncommon passphrase",
            "password2": "a long and uncommon passphrase",
            "phone_number": "+14155550100",
            "channel": "sms",
        },
    )


def test_sign_ups_per_address_are_limited(settings):
    settings.SIGNUP_RATE_LIMIT = "2/h"
    here, elsewhere = Client(REMOTE_ADDR="203.0.113.7"), Client(REMOTE_ADDR="198.51.100.9")
    assert [sign_up(Client(REMOTE_ADDR="203.0.113.7"), n).status_code for n in range(2)] == [302, 302]

    refused = sign_up(here, 3)

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "Too many sign-ups" in refused.content.decode()
    assert sign_up(elsewhere, 4).status_code == 302


def test_poke_login_on_a_full_account_says_why_and_issues_its_key_once_there_is_room(client, user, cap, settings):
    # Engineer h16's device log-in creates V2 keys: the cap answers there too, clearly, never a 500.
    settings.CLI_AUTH_POLL_MIN_SECONDS = 0  # polls back to back (slow_down is tested in test_cli_login)
    keys = [make_key(user, f"key {n}")[0] for n in range(cap)]
    body = client.post("/api/v1/cli-auth/code", headers={"User-Agent": "node"}).json()
    client.force_login(user)

    refused = client.post("/device", {"code": body["userCode"], "decision": "approve"})
    assert refused.status_code == 409
    assert "active API keys" in refused.content.decode()

    revoke_key(keys[0])
    assert client.post("/device", {"code": body["userCode"], "decision": "approve"}).status_code == 200
    make_key(user, "filled again meanwhile")  # the room is taken before the CLI collects its key
    full = client.get("/api/v1/cli-auth/poll/" + body["deviceCode"])
    assert full.status_code == 409
    assert (full.json()["status"], full.json()["code"]) == ("invalid", "key_limit_reached")

    revoke_key(keys[1])
    collected = client.get("/api/v1/cli-auth/poll/" + body["deviceCode"])
    assert (collected.status_code, collected.json()["status"]) == (200, "authenticated")
