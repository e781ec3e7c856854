"""Misconfigured hand-off settings are reported at start-up (system checks, strict env helpers); the webhook
signature's wire format."""

import base64
import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from standardwebhooks import Webhook

from assistant.checks import check_assistant_backend, check_task_backend_for_production
from assistant.signing import SignatureError, secret_bytes, sign, signature, verify
from config.env import env_choice, env_float


def codes(messages) -> list[str]:
    return [message.id for message in messages]


def test_the_default_local_backend_needs_nothing(settings):
    settings.ASSISTANT_BACKEND = "local"
    assert check_assistant_backend() == []


def test_the_webhook_backend_needs_a_url_and_a_secret(settings):
    settings.ASSISTANT_BACKEND = "webhook"
    settings.ASSISTANT_WEBHOOK_URL = "ftp://runtime"
    settings.ASSISTANT_WEBHOOK_KEY = b""
    assert codes(check_assistant_backend()) == ["assistant.E001", "assistant.E002"]


def test_the_openai_backend_needs_an_http_base_url_and_a_model(settings):
    settings.ASSISTANT_BACKEND = "openai"
    settings.OPENAI_BASE_URL = "api.openai.com"
    settings.OPENAI_MODEL = ""
    assert codes(check_assistant_backend()) == ["assistant.E003", "assistant.E004"]


def test_the_deploy_check_warns_about_the_immediate_task_backend(settings):
    settings.TASK_BACKEND = "immediate"
    assert codes(check_task_backend_for_production()) == ["assistant.W001"]
    settings.TASK_BACKEND = "database"
    assert check_task_backend_for_production() == []


@pytest.mark.parametrize(
    "secret", ["", "sk_abc", "whsec_not base64!", "whsec_c2hvcnQ=", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
)
def test_a_bad_webhook_secret_is_refused(secret):
    with pytest.raises(ValueError):
        secret_bytes(secret)


def test_signatures_match_the_standard_webhooks_reference_example():
    key = secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    headers = sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_what_we_sign_passes_the_reference_verifier_our_users_run():
    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    body = '{"message":"héllo, ünïcode"}'.encode()
    headers = sign(secret_bytes(secret), "msg_3kTqG0aXb2mW9sYfR1uLc8Hd", int(time.time()), body)

    assert Webhook(secret).verify(body, headers) == {"message": "héllo, ünïcode"}
    # the same bytes as before the library signed them: HMAC-SHA256 over the id, the timestamp and the UTF-8 body
    assert signature(secret_bytes(secret), "msg_3kTqG0aXb2mW9sYfR1uLc8Hd", 1795346431, body) == (
        "v1,S/Ew0fxpcvfXxdxyJV6RRcXFz6qwtyYyO200EVX2yY0="
    )


def test_a_body_that_is_not_utf8_is_refused_as_unsigned_not_a_500():
    key = secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    headers = {"webhook-id": "evt_1", "webhook-timestamp": "1614265330", "webhook-signature": "v1,AAAA"}
    with pytest.raises(SignatureError, match="not UTF-8"):
        verify(key, headers, b'{"reply": "\xff"}', now=1614265330, tolerance=300)


def test_env_helpers_refuse_what_they_cannot_understand(monkeypatch):
    monkeypatch.setenv("ASSISTANT_BACKEND", "gpt")
    with pytest.raises(ImproperlyConfigured, match="local, webhook, openai"):
        env_choice("ASSISTANT_BACKEND", "local", ["local", "webhook", "openai"])
    for bad in ["soon", "nan", "-1", "inf"]:
        monkeypatch.setenv("ASSISTANT_TIMEOUT_SECONDS", bad)
        with pytest.raises(ImproperlyConfigured):
            env_float("ASSISTANT_TIMEOUT_SECONDS", 10)
    monkeypatch.setenv("ASSISTANT_TIMEOUT_SECONDS", "2.5")
    assert env_float("ASSISTANT_TIMEOUT_SECONDS", 10) == 2.5
