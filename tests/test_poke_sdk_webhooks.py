"""The PyPI SDK's create_webhook and send_webhook (poke 0.2.1, unmodified) against a live server, and its
credentials-file fallback (the token `poke login` stores, used as the API key)."""

import json

import pytest
from poke import AuthenticationError, Poke, PokeError

from conversations.models import Message, Role, Source
from tests.factories import make_key
from triggers.models import WebhookTrigger
from triggers.services import revoke_trigger

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_then_send_webhook(poke_sdk_env, live_server):
    key, plaintext = make_key()
    poke = Poke(api_key=plaintext)

    created = poke.create_webhook(condition="When a new order is placed", action="Send me a summary of the order")

    trigger = WebhookTrigger.objects.get()
    assert created["triggerId"] == trigger.public_id
    assert created["webhookUrl"] == f"{live_server.url}/api/v1/inbound/webhook/{trigger.public_id}"
    assert created["webhookToken"].startswith("pwh_")

    result = poke.send_webhook(
        webhook_url=created["webhookUrl"], webhook_token=created["webhookToken"], data={"order": 1042, "total": 38.5}
    )

    assert result["success"] is True
    message = Message.objects.get(role=Role.USER)
    assert result["id"] == message.public_id
    assert (message.source, message.trigger, message.context) == (
        Source.WEBHOOK_TRIGGER, trigger, {"order": 1042, "total": 38.5}
    )  # fmt: skip
    assert message.conversation.user == key.owner
    assert Message.objects.filter(role=Role.ASSISTANT).count() == 1  # handed to the assistant like any message


def test_send_webhook_with_the_api_key_instead_of_the_token_is_the_authentication_error(poke_sdk_env):
    _, plaintext = make_key()
    poke = Poke(api_key=plaintext)
    created = poke.create_webhook(condition="When X", action="Do Y")
    with pytest.raises(AuthenticationError):
        poke.send_webhook(webhook_url=created["webhookUrl"], webhook_token=plaintext, data={"a": 1})
    assert not Message.objects.exists()


def test_a_revoked_trigger_is_the_authentication_error(poke_sdk_env):
    _, plaintext = make_key()
    poke = Poke(api_key=plaintext)
    created = poke.create_webhook(condition="When X", action="Do Y")
    revoke_trigger(WebhookTrigger.objects.get())
    with pytest.raises(AuthenticationError):
        poke.send_webhook(webhook_url=created["webhookUrl"], webhook_token=created["webhookToken"], data={"a": 1})


def test_the_sdk_shows_our_message_for_a_blank_condition_and_an_empty_payload(poke_sdk_env):
    _, plaintext = make_key()
    poke = Poke(api_key=plaintext)
    with pytest.raises(PokeError) as raised:
        poke.create_webhook(condition="  ", action="Do Y")
    assert raised.value.status == 400
    assert "'condition' is blank" in str(raised.value)
    created = poke.create_webhook(condition="When X", action="Do Y")
    with pytest.raises(PokeError) as raised:
        poke.send_webhook(webhook_url=created["webhookUrl"], webhook_token=created["webhookToken"], data={})
    assert raised.value.status == 400
    assert "empty object" in str(raised.value)


def test_the_credentials_file_stands_in_for_the_api_key(poke_sdk_env, poke_home):
    _, plaintext = make_key()
    poke_home.credentials_file.parent.mkdir(parents=True)
    poke_home.credentials_file.write_text(json.dumps({"token": plaintext}))

    poke = Poke()  # no api_key, no POKE_API_KEY
    assert poke.send_message("Water the plants at 6pm")["success"] is True
    created = poke.create_webhook(condition="When X", action="Do Y")
    assert poke.send_webhook(webhook_url=created["webhookUrl"], webhook_token=created["webhookToken"], data={"a": 1})[
        "success"
    ]
    assert Message.objects.filter(role=Role.USER).count() == 2


def test_a_console_default_key_sends_but_create_webhook_is_the_sdks_forbidden_error(poke_sdk_env):
    # What Add API Key gives by default (messages:send, receipts:read): the SDK's send works unmodified, and its
    # create_webhook fails with the SDK's own error for a 403 (it shows its own sentence, not the body's).
    from poke import ForbiddenError

    from keys.scopes import CONSOLE_DEFAULT

    _, plaintext = make_key(scopes=CONSOLE_DEFAULT)
    poke = Poke(api_key=plaintext)
    assert poke.send_message("Water the plants at 6pm")["success"] is True

    with pytest.raises(ForbiddenError) as raised:
        poke.create_webhook(condition="When X", action="Do Y")

    assert raised.value.status == 403
    assert "doesn't have permission" in str(raised.value)
    assert not WebhookTrigger.objects.exists()


def test_a_key_given_webhooks_manage_creates_webhooks_through_the_sdk(poke_sdk_env):
    from keys.scopes import Scope

    _, plaintext = make_key(scopes=[Scope.WEBHOOKS_MANAGE])
    created = Poke(api_key=plaintext).create_webhook(condition="When X", action="Do Y")
    assert created["webhookToken"].startswith("pwh_")
