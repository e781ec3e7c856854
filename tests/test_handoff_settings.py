"""Misconfigured hand-off settings are reported at start-up (system checks, strict env helpers)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from assistant.checks import check_assistant_backend, check_task_backend_for_production
from assistant.signing import secret_bytes, sign
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
