from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from channels.adapters import adapter_for
from channels.adapters.base import Channel, SendError
from channels.adapters.telegram import WEBHOOK_PATH, TelegramAdapter


class Command(BaseCommand):
    help = (
        "Point the Telegram bot's updates at PUBLIC_BASE_URL/channels/telegram/webhook with TELEGRAM_WEBHOOK_SECRET "
        "as its secret token (Telegram's setWebhook). Run it once after deploying, and after changing either."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        adapter = adapter_for(Channel.TELEGRAM)
        if not isinstance(adapter, TelegramAdapter):
            raise CommandError(
                "Telegram is not configured: set TELEGRAM_BOT_TOKEN, TELEGRAM_BOT_USERNAME and TELEGRAM_WEBHOOK_SECRET."
            )
        url = settings.PUBLIC_BASE_URL + WEBHOOK_PATH
        try:
            said = adapter.set_webhook(url)
        except SendError as error:
            raise CommandError(f"Telegram refused the webhook: {error.reason}") from None
        self.stdout.write(f"Telegram now sends the bot's messages to {url} ({said or 'ok'}).")
