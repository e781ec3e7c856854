"""System checks for the channel settings: a provider half configured (so silently not offered), a Telegram secret
Telegram would refuse, and (``check --deploy``) a public URL the providers cannot call or sign over."""

import re
from typing import Any

from django.conf import settings
from django.core import checks

# Each provider's settings; a channel is offered only when all of one set are present (channels/adapters).
_PROVIDERS = {
    "Twilio": ("TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN"),
    "WhatsApp Cloud API": (
        "WHATSAPP_CLOUD_ACCESS_TOKEN",
        "WHATSAPP_CLOUD_PHONE_NUMBER_ID",
        "WHATSAPP_CLOUD_APP_SECRET",
        "WHATSAPP_CLOUD_VERIFY_TOKEN",
    ),
    "BlueBubbles": ("BLUEBUBBLES_URL", "BLUEBUBBLES_PASSWORD", "BLUEBUBBLES_WEBHOOK_SECRET"),
    "Telegram": ("TELEGRAM_BOT_TOKEN", "TELEGRAM_BOT_USERNAME", "TELEGRAM_WEBHOOK_SECRET"),
}
# setWebhook's secret_token: 1-256 characters, A-Z, a-z, 0-9, _ and - (Telegram Bot API).
_TELEGRAM_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


def _any_channel() -> bool:
    return any(all(getattr(settings, name) for name in names) for names in _PROVIDERS.values())


@checks.register()
def check_channel_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problems: list[checks.CheckMessage] = []
    for provider, names in _PROVIDERS.items():
        missing = [name for name in names if not getattr(settings, name)]
        if missing and len(missing) < len(names):
            problems.append(
                checks.Warning(
                    f"{provider} is partly configured: {', '.join(missing)} not set, so its channel is not offered.",
                    hint="Set every one of them, or none.",
                    id="channels.W001",
                )
            )
    twilio_senders = settings.TWILIO_SMS_FROM or settings.TWILIO_WHATSAPP_FROM
    if settings.TWILIO_ACCOUNT_SID and settings.TWILIO_AUTH_TOKEN and not twilio_senders:
        problems.append(
            checks.Warning(
                "Twilio has credentials but no sender: set TWILIO_SMS_FROM and/or TWILIO_WHATSAPP_FROM.",
                id="channels.W002",
            )
        )
    secret = settings.TELEGRAM_WEBHOOK_SECRET
    if secret and not _TELEGRAM_SECRET.fullmatch(secret):
        problems.append(
            checks.Error(
                "TELEGRAM_WEBHOOK_SECRET must be 1 to 256 characters of A-Z, a-z, 0-9, _ and - (Telegram refuses "
                "any other secret_token).",
                id="channels.E001",
            )
        )
    return problems


@checks.register(checks.Tags.security, deploy=True)
def check_public_base_url(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The providers call PUBLIC_BASE_URL + path, and Twilio signs exactly that URL: it must be this server's public
    https address, without a trailing path."""
    if not _any_channel():
        return []
    url = settings.PUBLIC_BASE_URL
    if not url.startswith("https://") or url.count("/") > 2:
        return [
            checks.Error(
                f"PUBLIC_BASE_URL is {url!r}: with channels configured it must be this server's public https origin "
                "(https://host), the address pasted into the providers' consoles.",
                hint="Twilio's signatures are checked over PUBLIC_BASE_URL + path, byte for byte.",
                id="channels.E002",
            )
        ]
    return []
