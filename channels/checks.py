"""System checks for the channel settings: a provider half configured (so silently not offered), a Telegram secret
Telegram would refuse, a WhatsApp template that would never be sent or that its provider would refuse, and
(``check --deploy``) a public URL the providers cannot call or sign over."""

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
# A Content API template's SID (Twilio), and a WhatsApp template's language code as Meta writes them (en, en_US, fil).
_CONTENT_SID = re.compile(r"HX[0-9a-fA-F]{32}")
_TEMPLATE_LANGUAGE = re.compile(r"[a-z]{2,3}(_[A-Z]{2})?")


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
    problems += _template_problems()
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


def _template_problems() -> list[checks.CheckMessage]:
    """WhatsApp's template for texts outside its 24-hour window: one the provider that carries WhatsApp would never
    send (the texts would be held, unexplained), or a value the provider refuses (every such send would fail)."""
    problems: list[checks.CheckMessage] = []
    cloud = all(getattr(settings, name) for name in _PROVIDERS["WhatsApp Cloud API"])
    unused = []
    if settings.TWILIO_WHATSAPP_TEMPLATE_SID and (cloud or not settings.TWILIO_WHATSAPP_FROM):
        unused.append("TWILIO_WHATSAPP_TEMPLATE_SID (WhatsApp does not go through Twilio here)")
    if settings.WHATSAPP_CLOUD_TEMPLATE_NAME and not cloud:
        unused.append("WHATSAPP_CLOUD_TEMPLATE_NAME (WhatsApp does not go through the Cloud API here)")
    for setting in unused:
        problems.append(
            checks.Warning(
                f"{setting} is never sent.",
                hint="WhatsApp goes through the Cloud API when it is configured, else through Twilio: set the "
                "template of the provider that carries it.",
                id="channels.W003",
            )
        )
    sid = settings.TWILIO_WHATSAPP_TEMPLATE_SID
    if sid and not _CONTENT_SID.fullmatch(sid):
        problems.append(
            checks.Error(
                "TWILIO_WHATSAPP_TEMPLATE_SID must be a Content API template's SID (HX and 32 hexadecimal digits).",
                id="channels.E003",
            )
        )
    language = settings.WHATSAPP_CLOUD_TEMPLATE_LANGUAGE
    if settings.WHATSAPP_CLOUD_TEMPLATE_NAME and not _TEMPLATE_LANGUAGE.fullmatch(language):
        problems.append(
            checks.Error(
                f"WHATSAPP_CLOUD_TEMPLATE_LANGUAGE is {language!r}: it must be the template's language code as Meta "
                "writes it (en, en_US, pt_BR).",
                id="channels.E003",
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
