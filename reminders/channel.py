"""Telling the person on their channel (SMS, WhatsApp, iMessage) that a reminder is due, when this server is
configured with a gateway for it: REMINDER_CHANNEL_WEBHOOK_URL receives

    POST {"type": "reminder.due", "reminderId", "text", "channel", "phoneNumber"}
    Authorization: Bearer REMINDER_CHANNEL_WEBHOOK_TOKEN (when set)

and sends the text on. Without the setting, or without a phone number on the profile, the thread is the only place
the reminder appears. A failure is logged (without the URL, which may carry a token) and not retried: the reminder
is in the thread either way.
"""

import json
import logging
import urllib.error
import urllib.request

from django.conf import settings
from django.contrib.auth.models import User

from accounts.services import profile_of

logger = logging.getLogger(__name__)


def notify(owner: User, text: str, reminder_id: str) -> bool:
    url = settings.REMINDER_CHANNEL_WEBHOOK_URL
    profile = profile_of(owner)
    if not url or not profile.phone_number:
        return False
    body = json.dumps(
        {
            "type": "reminder.due",
            "reminderId": reminder_id,
            "text": text,
            "channel": profile.channel,
            "phoneNumber": profile.phone_number,
        }
    ).encode()
    headers = {"Content-Type": "application/json"}
    if settings.REMINDER_CHANNEL_WEBHOOK_TOKEN:
        headers["Authorization"] = f"Bearer {settings.REMINDER_CHANNEL_WEBHOOK_TOKEN}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 (operator's http(s) URL)
    try:
        with urllib.request.urlopen(request, timeout=settings.REMINDER_CHANNEL_TIMEOUT_SECONDS) as answer:  # noqa: S310
            answer.read(1024)
    except (urllib.error.URLError, OSError, ValueError) as error:
        logger.warning("reminder %s: the channel gateway failed (%s)", reminder_id, type(error).__name__)
        return False
    return True
