"""WhatsApp outside its 24-hour window, through Twilio: the operator's approved template (a Content API template,
TWILIO_WHATSAPP_TEMPLATE_SID = HX…) with the text as its variable {{1}}. Meta approves the template's wording;
ours only fills the variable, so one template such as "Your assistant has a message for you: {{1}}" serves all.

Meta's Cloud API has templates too, named per business: not offered here (the text is held instead)."""

import json

import requests
from django.conf import settings
from twilio.base.exceptions import TwilioException, TwilioRestException

from channels.adapters.base import Adapter, Channel, SendError, Sent
from channels.adapters.twilio import STATUS_PATH, TwilioAdapter

# A template variable's limit (WhatsApp's, for one parameter of a template's body).
VARIABLE_LIMIT = 1024


def can_send(adapter: Adapter | None) -> bool:
    return (
        bool(settings.TWILIO_WHATSAPP_TEMPLATE_SID)
        and isinstance(adapter, TwilioAdapter)
        and (adapter.channel == Channel.WHATSAPP)
    )


def send(adapter: TwilioAdapter, address: str, text: str) -> Sent:
    variable = text if len(text) <= VARIABLE_LIMIT else text[: VARIABLE_LIMIT - 1] + "…"
    try:
        message = adapter._client.messages.create(
            to=f"whatsapp:{address}",
            from_=f"whatsapp:{settings.TWILIO_WHATSAPP_FROM}",
            content_sid=settings.TWILIO_WHATSAPP_TEMPLATE_SID,
            content_variables=json.dumps({"1": variable}),
            status_callback=settings.PUBLIC_BASE_URL + STATUS_PATH,
        )
    except TwilioRestException as error:
        retryable = error.status >= 500 or error.status == 429
        raise SendError(
            f"Twilio answered HTTP {error.status}: {error.code} {error.msg}"[:300], retryable=retryable
        ) from None
    except requests.RequestException as error:
        raise SendError(f"Twilio did not answer: {type(error).__name__}.", retryable=True) from None
    except TwilioException as error:
        raise SendError(f"Twilio: {type(error).__name__}.", retryable=True) from None
    return Sent(provider_message_id=str(message.sid))
