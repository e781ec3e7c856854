"""SMS and WhatsApp through Twilio's Messages API, with the official library (``twilio``).

One class serves both channels: WhatsApp addresses are ``whatsapp:+E164`` on Twilio's side, plain E.164 on ours.
Both channels' inbound messages come to one URL (``/channels/twilio/inbound``) and their statuses to another
(``/channels/twilio/status``, given as each send's ``StatusCallback``). Twilio signs each callback with the account's
auth token over the URL it called, byte for byte as configured in its console (PUBLIC_BASE_URL + path), and the
form's parameters: ``twilio.request_validator.RequestValidator`` checks it.

WhatsApp outside its 24-hour window: the operator's approved Content API template (TWILIO_WHATSAPP_TEMPLATE_SID),
the text as its variable ``{{1}}`` (``send_template``).

The Messages API has no idempotency key: a send that timed out may have gone out. Before it is sent again,
``find_sent`` looks for it in the Messages list, filtered by recipient, sender and DateSent
(channels/adapters/unknown.py)."""

import hmac
import json
import logging
import re
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl

import requests
from django.conf import settings
from django.http import HttpRequest
from django.utils.datastructures import MultiValueDict
from requests.adapters import HTTPAdapter
from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.request_validator import RequestValidator
from twilio.rest import Client

from channels.adapters.base import (
    BadRequest,
    Channel,
    Inbound,
    SendError,
    Sent,
    StatusUpdate,
    VerificationFailed,
    no_template,
    template_variable,
)
from ops.bounded import Busy, Exceeded, TooLarge, TooSlow, bound_session

INBOUND_PATH = "/channels/twilio/inbound"
STATUS_PATH = "/channels/twilio/status"
# Twilio's limit for one message's Body (it splits SMS into segments itself).
MAX_TEXT_LENGTH = 1600
_WHATSAPP = "whatsapp:"
# The library logs every request, body included (the person's number and text), at INFO: kept below that.
_LIBRARY_LOG = logging.getLogger("channels.twilio.library")
_LIBRARY_LOG.setLevel(logging.WARNING)
# Twilio's words for where a message is, mapped onto ours (base.STATUSES). Inbound-only states are left out.
_STATUS = {
    "accepted": "queued",
    "scheduled": "queued",
    "queued": "queued",
    "sending": "queued",
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "undelivered": "undelivered",
    "failed": "failed",
    "canceled": "failed",
}
# find_sent: how many of the newest messages to the person it reads, and how far before the attempt it looks.
FIND_LIMIT = 20
FIND_SLACK = timedelta(seconds=5)
_FAILED = {"failed", "undelivered", "canceled"}
_MESSAGE_SID = re.compile(r"(SM|MM)[0-9a-fA-F]{32}")


def configured_channels() -> list[str]:
    """The channels the operator's Twilio settings make available."""
    if not (settings.TWILIO_ACCOUNT_SID and settings.TWILIO_AUTH_TOKEN):
        return []
    return [
        channel
        for channel, sender in (
            (Channel.SMS, settings.TWILIO_SMS_FROM),
            (Channel.WHATSAPP, settings.TWILIO_WHATSAPP_FROM),
        )
        if sender
    ]


def _client() -> Client:
    http_client = TwilioHttpClient(timeout=settings.CHANNEL_TIMEOUT_SECONDS, logger=_LIBRARY_LOG)
    # The library keeps at most min(32, cores + 4) connections: with CHANNEL_CONCURRENCY sends in flight, each send
    # past those opened a new TLS connection and threw it away (and logged a warning). One kept per send thread.
    # No retries here: the outbox retries, with backoff, and knows what an attempt was.
    pool = HTTPAdapter(pool_connections=1, pool_maxsize=max(settings.CHANNEL_CONCURRENCY, 1), max_retries=0)
    assert http_client.session is not None
    for scheme in ("https://", "http://"):
        http_client.session.mount(scheme, pool)
    # Every answer read through a bound (ops/bounded.py): CHANNEL_MAX_ANSWER_BYTES, and CHANNEL_TIMEOUT_SECONDS for
    # the whole exchange rather than for each read.
    bound_session(http_client.session, "Twilio", max_bytes=settings.CHANNEL_MAX_ANSWER_BYTES)
    # environment={}: TWILIO_EDGE / TWILIO_REGION in the process environment would move the host elsewhere.
    client = Client(settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, http_client=http_client, environment={})
    client.api.base_url = settings.TWILIO_API_BASE_URL  # tests point it at a local server
    return client


def form_of(request: HttpRequest) -> MultiValueDict[str, str]:
    """The callback's form, read strictly: a body that is not UTF-8 (raw or percent-encoded) is refused rather than
    read with replacement characters (which would then not match Twilio's signature anyway). Cached on the
    request: the validator and the parser read the same form."""
    cached: MultiValueDict[str, str] | None = request.META.get("channels.twilio_form")  # in the WSGI environ
    if cached is not None:
        return cached
    try:
        pairs = parse_qsl(request.body.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("The body is not UTF-8.") from None
    except ValueError:
        raise BadRequest("The body is not a form (application/x-www-form-urlencoded).") from None
    form: MultiValueDict[str, str] = MultiValueDict()
    for name, value in pairs:
        form.appendlist(name, value)
    request.META["channels.twilio_form"] = form
    return form


class TwilioAdapter:
    max_text_length = MAX_TEXT_LENGTH

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._client = _client()

    def _addressed(self, number: str) -> str:
        return _WHATSAPP + number if self.channel == Channel.WHATSAPP else number

    def _origin(self) -> dict[str, str]:
        """The sender: a Messaging Service (``MG…``) or this channel's number."""
        sender = settings.TWILIO_WHATSAPP_FROM if self.channel == Channel.WHATSAPP else settings.TWILIO_SMS_FROM
        return {"messaging_service_sid": sender} if sender.startswith("MG") else {"from_": self._addressed(sender)}

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        return self._create(to=self._addressed(address), body=text, **self._origin())

    def can_send_template(self) -> bool:
        return self.channel == Channel.WHATSAPP and bool(settings.TWILIO_WHATSAPP_TEMPLATE_SID)

    def send_template(self, address: str, text: str, *, reference: str) -> Sent:
        """The approved Content API template (TWILIO_WHATSAPP_TEMPLATE_SID, ``HX…``) with the text as its variable
        ``{{1}}``: ContentSid and ContentVariables, no Body (the template holds the wording)."""
        if not self.can_send_template():
            raise no_template(self.channel)
        return self._create(
            to=self._addressed(address),
            content_sid=settings.TWILIO_WHATSAPP_TEMPLATE_SID,
            content_variables=json.dumps({"1": template_variable(text)}),
            **self._origin(),
        )

    def _create(self, **message: Any) -> Sent:
        """One Messages API create, its status reported to our callback; Twilio's failures as SendError."""
        try:
            created = self._client.messages.create(status_callback=settings.PUBLIC_BASE_URL + STATUS_PATH, **message)
        except TwilioRestException as error:
            retryable = error.status >= 500 or error.status == 429
            # Twilio's own error code and text (21211 invalid number, 21610 unsubscribed, ...); never the URL.
            raise SendError(
                f"Twilio answered HTTP {error.status}: {error.code} {error.msg}"[:300], retryable=retryable
            ) from None
        except Busy as error:  # the request went out; its answer was cut because this process was full
            raise SendError(str(error), retryable=True, unknown=True) from None
        except TooLarge as error:
            raise SendError(str(error), retryable=False) from None
        except (requests.RequestException, TooSlow) as error:
            # Refused or unreachable: nothing went out. Anything else after the request left: Twilio may have it.
            unknown = not isinstance(error, requests.ConnectTimeout)
            raise SendError(
                f"Twilio did not answer: {type(error).__name__}.", retryable=True, unknown=unknown
            ) from None
        except TwilioException as error:
            raise SendError(f"Twilio: {type(error).__name__}.", retryable=True) from None
        return Sent(provider_message_id=str(created.sid))

    def find_sent(self, address: str, text: str, *, since: datetime, as_template: bool) -> Sent | None:
        """The Messages list filtered by To, From and DateSent (Twilio matches the day; this filter takes messages
        created from ``since`` on, less a few seconds for clocks that differ), newest first: one with this text
        (any, for a template: its wording is the template's) that Twilio did not fail. A message Twilio still
        queues has no DateSent yet and is not found: the send then goes again."""
        origin = self._origin()
        sender = origin.get("from_")
        after = since - FIND_SLACK
        try:
            found = self._client.messages.list(
                to=self._addressed(address), from_=sender, date_sent_after=after, limit=FIND_LIMIT
            )
        except TwilioRestException as error:
            raise SendError(
                f"Twilio could not say whether an earlier attempt arrived: HTTP {error.status}.",
                retryable=True,
                unknown=True,
            ) from None
        except (requests.RequestException, TwilioException, Exceeded) as error:
            raise SendError(
                f"Twilio could not say whether an earlier attempt arrived: {type(error).__name__}.",
                retryable=True,
                unknown=True,
            ) from None
        for message in found:
            created = message.date_created
            if created is None or created < after or message.status in _FAILED:
                continue
            if str(message.direction or "").startswith("outbound") and (as_template or message.body == text):
                return Sent(provider_message_id=str(message.sid))
        return None

    def verify(self, request: HttpRequest) -> None:
        signature = request.headers.get("X-Twilio-Signature", "")
        if not signature:
            raise VerificationFailed("no X-Twilio-Signature header")
        url = settings.PUBLIC_BASE_URL + request.get_full_path()
        validator, form = RequestValidator(settings.TWILIO_AUTH_TOKEN), form_of(request)
        # validate() computes the signature twice, over the URL with and without its port (Twilio has signed either
        # way). The URL as configured is one of those two, and the one Twilio signs: checked first, it spares the
        # second HMAC of every genuine callback; anything else gets validate()'s full check.
        if hmac.compare_digest(validator.compute_signature(url, form).encode(), signature.encode()):
            return
        if not validator.validate(url, form, signature):
            raise VerificationFailed("X-Twilio-Signature does not match")

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        """The message, if it is this adapter's channel's (WhatsApp senders are ``whatsapp:+...``)."""
        form = form_of(request)
        sender = form.get("From", "")
        sid = form.get("MessageSid", "") or form.get("SmsMessageSid", "")
        if not _MESSAGE_SID.fullmatch(sid):
            raise BadRequest("MessageSid is missing or malformed.")
        is_whatsapp = sender.startswith(_WHATSAPP)
        if is_whatsapp != (self.channel == Channel.WHATSAPP):
            return []
        number = sender.removeprefix(_WHATSAPP)
        media = []
        for index in range(min(_count(form.get("NumMedia", "0")), 10)):  # Twilio sends at most 10
            url = form.get(f"MediaUrl{index}", "")
            if url:
                media.append({"url": url, "contentType": form.get(f"MediaContentType{index}", "")})
        profile = str(form.get("ProfileName") or "")
        extra = {"profileName": profile} if profile else {}
        return [Inbound(sid, number, form.get("Body", ""), media, None, extra)]

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        form = form_of(request)
        sid = form.get("MessageSid", "") or form.get("SmsSid", "")
        status = _STATUS.get(form.get("MessageStatus", "") or form.get("SmsStatus", ""))
        if not _MESSAGE_SID.fullmatch(sid):
            raise BadRequest("MessageSid is missing or malformed.")
        if status is None:
            return []
        error = form.get("ErrorCode", "")
        if error and form.get("ErrorMessage"):
            error = f"{error} {form.get('ErrorMessage')}"
        return [StatusUpdate(sid, status, error[:300])]


def _count(value: str) -> int:
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses (a 500 found by the fuzz test).
    return int(value) if value.isascii() and value.isdigit() else 0
