"""What the operator sees of the channels: system checks on their settings (``check``, ``check --deploy``), the
command that registers Telegram's webhook, and the BlueBubbles secret kept out of every log."""

import logging
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from channels.checks import check_channel_settings, check_public_base_url
from ops.redaction import RedactResetLinks
from tests import providers as p


def _ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_a_half_configured_provider_is_reported(settings):
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_BOT_USERNAME, settings.TELEGRAM_WEBHOOK_SECRET = "t", "", ""
    assert "channels.W001" in _ids(check_channel_settings())


def test_twilio_without_a_sender_is_reported(providers, settings):
    settings.TWILIO_SMS_FROM = settings.TWILIO_WHATSAPP_FROM = ""
    assert "channels.W002" in _ids(check_channel_settings())


def test_a_fully_configured_set_passes(providers):
    assert check_channel_settings() == []


def test_a_telegram_secret_telegram_would_refuse_is_an_error(providers, settings):
    settings.TELEGRAM_WEBHOOK_SECRET = "has spaces and ünicode"
    assert "channels.E001" in _ids(check_channel_settings())


def test_a_template_whatsapp_will_never_send_is_reported(providers, settings):
    """WhatsApp goes through the Cloud API when it is configured: Twilio's template would never go out, and the
    reverse; the texts it was meant for would be held without anyone knowing why."""
    settings.TWILIO_WHATSAPP_TEMPLATE_SID = "HX" + "a" * 32  # the Cloud API carries WhatsApp here
    assert "channels.W003" in _ids(check_channel_settings())
    p.configure(settings, providers, "http://testserver", whatsapp_through="twilio")
    assert "channels.W003" not in _ids(check_channel_settings())
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = "assistant_message"
    assert "channels.W003" in _ids(check_channel_settings())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TWILIO_WHATSAPP_TEMPLATE_SID", "assistant_message"),  # a name where Twilio wants its Content SID
        ("WHATSAPP_CLOUD_TEMPLATE_LANGUAGE", "English"),
        ("WHATSAPP_CLOUD_TEMPLATE_LANGUAGE", "en-US"),
    ],
)
def test_a_template_setting_the_provider_would_refuse_is_an_error(providers, settings, name, value):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = "assistant_message"
    setattr(settings, name, value)
    assert "channels.E003" in _ids(check_channel_settings())


def test_well_formed_template_settings_pass(providers, settings):
    settings.WHATSAPP_CLOUD_TEMPLATE_NAME = "assistant_message"
    for language in ("en", "en_US", "pt_BR", "fil"):
        settings.WHATSAPP_CLOUD_TEMPLATE_LANGUAGE = language
        assert check_channel_settings() == []


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://inbox.example.com", True),
        ("http://inbox.example.com", False),
        ("https://inbox.example.com/app", False),
    ],
)
def test_deploy_wants_an_https_origin_once_a_channel_is_configured(providers, settings, url, ok):
    settings.PUBLIC_BASE_URL = url
    assert (check_public_base_url() == []) is ok


def test_deploy_does_not_care_without_channels(settings):
    for name in ("TWILIO_ACCOUNT_SID", "WHATSAPP_CLOUD_ACCESS_TOKEN", "BLUEBUBBLES_URL", "TELEGRAM_BOT_TOKEN"):
        setattr(settings, name, "")
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    assert check_public_base_url() == []


def test_settelegramwebhook_registers_our_url_and_secret(providers, settings):
    settings.PUBLIC_BASE_URL = "https://inbox.example.com"
    out = StringIO()
    call_command("settelegramwebhook", stdout=out)
    assert providers.telegram.webhook == {
        "url": "https://inbox.example.com/channels/telegram/webhook",
        "secret_token": p.TELEGRAM_WEBHOOK_SECRET,
        "allowed_updates": ["message", "callback_query"],  # button taps answer approval requests
    }
    assert "Webhook was set" in out.getvalue()
    assert p.TELEGRAM_BOT_TOKEN not in out.getvalue()


def test_settelegramwebhook_says_what_is_missing_or_what_telegram_said(providers, settings):
    providers.telegram.fail_next(400, body={"ok": False, "error_code": 400, "description": "Bad Request: bad webhook"})
    with pytest.raises(CommandError, match="bad webhook"):
        call_command("settelegramwebhook", stdout=StringIO())
    settings.TELEGRAM_BOT_TOKEN = ""
    with pytest.raises(CommandError, match="not configured"):
        call_command("settelegramwebhook", stdout=StringIO())


SECRET_URL = f"/channels/bluebubbles/webhook?secret={p.BLUEBUBBLES_WEBHOOK_SECRET}"


def test_the_bluebubbles_secret_is_blanked_in_log_lines():
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "%s: %s", ("Failed", SECRET_URL), None)
    assert RedactResetLinks().filter(record)
    assert p.BLUEBUBBLES_WEBHOOK_SECRET not in record.getMessage()
    assert "secret=[redacted]" in record.getMessage()


def test_the_bluebubbles_secret_is_blanked_in_gunicorns_access_atoms(gunicorn_conf):
    from gunicorn.config import Config

    conf = gunicorn_conf()
    environ = {
        "REQUEST_METHOD": "POST",
        "RAW_URI": SECRET_URL,
        "PATH_INFO": "/channels/bluebubbles/webhook",
        "QUERY_STRING": SECRET_URL.split("?", 1)[1],
        "SERVER_PROTOCOL": "HTTP/1.1",
    }
    response = SimpleNamespace(status="200 OK", headers=[], sent=0)
    atoms = conf["logger_class"](Config()).atoms(response, [], environ, timedelta(milliseconds=3))
    assert p.BLUEBUBBLES_WEBHOOK_SECRET not in repr(atoms)
    assert atoms["r"] == "POST /channels/bluebubbles/webhook?secret=[redacted] HTTP/1.1"
    conf["on_exit"](None)


@pytest.mark.django_db
def test_a_callback_without_a_content_length_is_refused(client, providers):
    callback = providers.telegram.inbound(4242, "hi")
    response = client.generic(
        "POST",
        callback.path,
        callback.body,
        content_type=callback.content_type,
        headers=callback.headers,
        CONTENT_LENGTH="",
    )
    assert response.status_code == 411 and response.json()["code"] == "length_required"


@pytest.mark.django_db
def test_prunechannels_deletes_only_what_nothing_reads_any_more():
    from django.utils import timezone

    from channels.models import InboundEvent, LinkCode, LinkHint
    from tests.factories import UserFactory

    now = timezone.now()
    user = UserFactory()
    LinkCode.objects.create(user=user, channel="sms", address="+1", code_digest="a", expires_at=now - timedelta(days=2))
    fresh = LinkCode.objects.create(
        user=user, channel="sms", address="+1", code_digest="b", expires_at=now - timedelta(hours=1)
    )
    old = InboundEvent.objects.create(channel="sms", provider_message_id="SMold", address="+1")
    InboundEvent.objects.filter(pk=old.pk).update(received_at=now - timedelta(days=31))
    recent = InboundEvent.objects.create(channel="sms", provider_message_id="SMnew", address="+1")
    LinkHint.objects.create(channel="sms", address="+1", sent_at=now - timedelta(days=2))
    LinkHint.objects.create(channel="sms", address="+2", sent_at=now - timedelta(hours=2))
    out = StringIO()
    call_command("prunechannels", stdout=out)
    assert "Deleted 1 expired link code(s), 1 provider message id(s) and 1 how-to-link mark(s)." in out.getvalue()
    assert list(LinkCode.objects.all()) == [fresh]
    assert list(InboundEvent.objects.all()) == [recent]
    assert list(LinkHint.objects.values_list("address", flat=True)) == ["+2"]
