"""Each channel adapter against its provider played by a real HTTP server on 127.0.0.1 (tests/providers.py): what
goes over the wire when sending, how failures are classed, and the signatures each provider's callbacks carry,
checked against the providers' published examples."""

import hashlib
import hmac

import pytest
from django.test import RequestFactory
from twilio.request_validator import RequestValidator

from channels.adapters import adapter_for, configured
from channels.adapters.base import SendError, VerificationFailed
from channels.adapters.bluebubbles import BlueBubblesAdapter
from channels.adapters.twilio import TwilioAdapter
from channels.adapters.whatsapp_cloud import WhatsAppCloudAdapter, signature_of
from tests import providers as p


def test_twilios_request_validator_matches_twilios_published_example():
    # Twilio's "Webhook security" docs and twilio-python's own tests: this URL, these parameters, auth token 12345.
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+12349013030",
        "Digits": "1234",
        "From": "+12349013030",
        "To": "+18005551212",
    }
    validator = RequestValidator("12345")
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert validator.compute_signature(url, params) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
    assert validator.validate(url, params, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")
    assert not validator.validate(url, {**params, "Digits": "1235"}, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")


def test_metas_signature_is_the_documented_hmac_sha256_of_the_raw_body():
    # The algorithm as Meta documents it (HMAC-SHA256, app secret as key, raw body, hex, "sha256=" prefix),
    # against RFC 4231's test case 2 (key "Jefe"), which fixes the HMAC itself.
    body = b"what do ya want for nothing?"
    assert signature_of(body, "Jefe") == ("sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    assert signature_of(body, "Jefe") == "sha256=" + hmac.new(b"Jefe", body, hashlib.sha256).hexdigest()


def test_without_settings_no_channel_is_offered(settings):
    for name in ("TWILIO_ACCOUNT_SID", "WHATSAPP_CLOUD_ACCESS_TOKEN", "BLUEBUBBLES_URL", "TELEGRAM_BOT_TOKEN"):
        setattr(settings, name, "")
    assert configured() == {}
    assert adapter_for("sms") is None


def test_each_configured_channel_has_its_adapter(providers):
    assert list(configured()) == ["sms", "whatsapp", "imessage", "telegram"]
    assert isinstance(adapter_for("whatsapp"), WhatsAppCloudAdapter)  # the Cloud API wins over Twilio's WhatsApp


def test_whatsapp_goes_through_twilio_without_the_cloud_api(providers, settings):
    p.configure(settings, providers, "http://testserver", whatsapp_through="twilio")
    adapter = adapter_for("whatsapp")
    assert isinstance(adapter, TwilioAdapter)
    sent = adapter.send_text("+14155550134", "hello there", reference="out_1")
    (message,) = providers.twilio.sent
    assert message.fields["To"] == "whatsapp:+14155550134"
    assert message.fields["From"] == "whatsapp:" + p.TWILIO_WHATSAPP_FROM
    assert sent.provider_message_id == message.provider_message_id


def test_sms_through_the_twilio_library(providers):
    sent = adapter_for("sms").send_text("+14155550134", "Your table is booked.", reference="out_1")
    (message,) = providers.twilio.sent
    assert (message.address, message.text) == ("+14155550134", "Your table is booked.")
    assert message.fields["From"] == p.TWILIO_SMS_FROM
    assert message.fields["StatusCallback"] == "http://testserver/channels/twilio/status"
    assert sent.provider_message_id.startswith("SM")


def test_a_messaging_service_sends_sms_when_named(providers, settings):
    settings.TWILIO_SMS_FROM = "MG" + "a" * 32
    adapter_for("sms").send_text("+14155550134", "hi", reference="out_1")
    assert providers.twilio.sent[0].fields["MessagingServiceSid"] == "MG" + "a" * 32
    assert "From" not in providers.twilio.sent[0].fields


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (429, True), (400, False), (401, False), (404, False)]
)
@pytest.mark.parametrize("channel", ["sms", "whatsapp", "imessage", "telegram"])
def test_failures_are_retryable_only_when_the_provider_may_succeed_later(providers, channel, status, retryable):
    server = {"sms": providers.twilio, "whatsapp": providers.whatsapp}.get(channel) or (
        providers.bluebubbles if channel == "imessage" else providers.telegram
    )
    server.fail_next(status, body={"code": 99999, "message": "no", "status": status})
    with pytest.raises(SendError) as failure:
        adapter_for(channel).send_text("+14155550134" if channel != "telegram" else "42", "hi", reference="out_1")
    assert failure.value.retryable is retryable
    assert not server.sent


@pytest.mark.parametrize("channel", ["sms", "whatsapp", "imessage", "telegram"])
def test_a_slow_provider_is_a_retryable_failure_whose_text_holds_no_secret(providers, settings, channel):
    settings.CHANNEL_TIMEOUT_SECONDS = 0.3
    for server in providers.all():
        server.fail_next(200, delay=1)
    with pytest.raises(SendError) as failure:
        adapter_for(channel).send_text("+14155550134" if channel != "telegram" else "42", "hi", reference="out_1")
    assert failure.value.retryable
    for secret in (p.TELEGRAM_BOT_TOKEN, p.BLUEBUBBLES_PASSWORD, p.TWILIO_AUTH_TOKEN, p.WHATSAPP_ACCESS_TOKEN):
        assert secret not in failure.value.reason


def test_whatsapp_cloud_sends_text_with_the_bearer_token(providers):
    sent = adapter_for("whatsapp").send_text("+14155550134", "hello", reference="out_1")
    (message,) = providers.whatsapp.sent
    assert message.fields["to"] == "14155550134" and message.fields["text"] == {"preview_url": False, "body": "hello"}
    assert sent.provider_message_id.startswith("wamid.")


def test_bluebubbles_sends_to_the_one_to_one_chat_with_our_reference(providers):
    sent = adapter_for("imessage").send_text("+14155550134", "hello", reference="out_7")
    (message,) = providers.bluebubbles.sent
    assert message.fields["chatGuid"] == "iMessage;-;+14155550134"
    assert message.fields["tempGuid"] == "out_7"
    assert sent.provider_message_id == message.provider_message_id


def test_telegram_sends_to_the_chat_and_sets_its_webhook(providers):
    adapter = adapter_for("telegram")
    sent = adapter.send_text("4242", "hello", reference="out_1")
    assert providers.telegram.sent[0].fields == {"chat_id": 4242, "text": "hello"}
    assert sent.provider_message_id.startswith("4242:")
    assert adapter.set_webhook("https://example.com/channels/telegram/webhook") == "Webhook was set"
    assert providers.telegram.webhook["secret_token"] == p.TELEGRAM_WEBHOOK_SECRET


def _request(callback: p.Callback):
    factory = RequestFactory()
    return factory.generic(
        callback.method, callback.path, callback.body, content_type=callback.content_type, headers=callback.headers
    )


def test_each_adapter_accepts_its_providers_signature_and_refuses_any_other(providers):
    cases = [
        (adapter_for("sms"), providers.twilio.inbound("+14155550134", "hi")),
        (adapter_for("whatsapp"), providers.whatsapp.inbound("+14155550134", "hi")),
        (adapter_for("imessage"), providers.bluebubbles.inbound("+14155550134", "hi")),
        (adapter_for("telegram"), providers.telegram.inbound(4242, "hi")),
    ]
    for adapter, callback in cases:
        adapter.verify(_request(callback))
        (inbound,) = adapter.parse_inbound(_request(callback))
        assert inbound.text == "hi"
    forged = [
        (adapter_for("sms"), providers.twilio.signed("/channels/twilio/inbound", {"Body": "x"}, token="wrong")),
        (adapter_for("whatsapp"), providers.whatsapp.event({}, secret="wrong")),
        (adapter_for("imessage"), providers.bluebubbles.event("new-message", {}, secret="wrong")),
        (adapter_for("telegram"), providers.telegram.update({"update_id": 1}, secret="wrong")),
        (adapter_for("imessage"), providers.bluebubbles.event("new-message", {}, secret="")),
        (adapter_for("telegram"), providers.telegram.update({"update_id": 1}, secret="")),
    ]
    for adapter, callback in forged:
        with pytest.raises(VerificationFailed):
            adapter.verify(_request(callback))


def test_twilio_checks_the_signature_over_the_public_url_byte_for_byte(providers, settings):
    callback = providers.twilio.inbound("+14155550134", "hi")
    settings.PUBLIC_BASE_URL = "http://testserver/"  # one byte more than what Twilio signed
    with pytest.raises(VerificationFailed):
        adapter_for("sms").verify(_request(callback))


def test_twilio_signs_with_or_without_the_port_and_both_are_accepted(providers, settings):
    """The library's validate() accepts a signature over the URL with its default port as well as without it (Twilio
    has signed both ways): the adapter's quicker check of the URL as configured must not narrow that."""
    settings.PUBLIC_BASE_URL = "https://assistant.example"
    providers.twilio.public_base_url = "https://assistant.example:443"
    adapter_for("sms").verify(_request(providers.twilio.inbound("+14155550134", "hi")))
    providers.twilio.public_base_url = "https://assistant.example:8443"  # another port: another URL
    with pytest.raises(VerificationFailed):
        adapter_for("sms").verify(_request(providers.twilio.inbound("+14155550134", "hi")))


def test_statuses_are_parsed_into_the_common_words(providers):
    assert [
        (s.status, s.error)
        for s in adapter_for("sms").parse_statuses(
            _request(providers.twilio.status("SM" + "1" * 32, "undelivered", error_code="30003"))
        )
    ] == [("undelivered", "30003")]
    assert [
        s.status for s in adapter_for("whatsapp").parse_statuses(_request(providers.whatsapp.status("wamid.X", "read")))
    ] == ["read"]
    assert [
        s.status
        for s in BlueBubblesAdapter().parse_statuses(_request(providers.bluebubbles.updated("p:0/AB", delivered=True)))
    ] == ["delivered"]
    assert [
        s.error
        for s in BlueBubblesAdapter().parse_statuses(_request(providers.bluebubbles.updated("p:0/AB", error=22)))
    ] == ["BlueBubbles error 22"]
