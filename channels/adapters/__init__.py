"""Which channels this deployment offers, and the adapter of each (docs/design.md#channels).

A channel is offered when its provider's settings are all present; otherwise it is not shown, linked or sent to:

- sms: TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_SMS_FROM
- whatsapp: WHATSAPP_CLOUD_ACCESS_TOKEN, _PHONE_NUMBER_ID, _APP_SECRET, _VERIFY_TOKEN (Meta's Cloud API); else
  TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_WHATSAPP_FROM (Twilio). With both, the Cloud API sends.
- imessage: BLUEBUBBLES_URL, BLUEBUBBLES_PASSWORD, BLUEBUBBLES_WEBHOOK_SECRET
- telegram: TELEGRAM_BOT_TOKEN, TELEGRAM_BOT_USERNAME, TELEGRAM_WEBHOOK_SECRET

Adapters are built once per process and settings (tests change settings: ``setting_changed`` clears the cache)."""

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from channels.adapters import bluebubbles, telegram, twilio, whatsapp_cloud
from channels.adapters.base import Adapter, Channel

# The order channels are listed in, everywhere they are offered.
ORDER = (Channel.SMS, Channel.WHATSAPP, Channel.IMESSAGE, Channel.TELEGRAM)
_built: dict[str, Adapter] | None = None


def configured() -> dict[str, Adapter]:
    """Each offered channel's adapter, in ORDER."""
    global _built
    if _built is None:
        adapters: dict[str, Adapter] = {}
        for channel in twilio.configured_channels():
            adapters[channel] = twilio.TwilioAdapter(channel)
        if whatsapp_cloud.is_configured():
            adapters[Channel.WHATSAPP] = whatsapp_cloud.WhatsAppCloudAdapter()
        if bluebubbles.is_configured():
            adapters[Channel.IMESSAGE] = bluebubbles.BlueBubblesAdapter()
        if telegram.is_configured():
            adapters[Channel.TELEGRAM] = telegram.TelegramAdapter()
        _built = {channel: adapters[channel] for channel in ORDER if channel in adapters}
    return _built


def adapter_for(channel: str) -> Adapter | None:
    return configured().get(channel)


@receiver(setting_changed)
def _forget_adapters(**kwargs: Any) -> None:
    global _built
    _built = None
