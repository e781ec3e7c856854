"""The one small interface every channel adapter speaks (docs/design.md#channels): send a text to an address and get
the provider's message id; send the operator's approved template where the channel needs one (WhatsApp outside its
24-hour window); verify and parse an inbound request; parse a delivery-status callback.

An adapter is configured by operator settings only (one set of provider credentials per deployment, never per
person) and holds no state between calls beyond its HTTP client. Addresses are in the form each channel routes by:
E.164 (``+14155550134``) for SMS, WhatsApp and iMessage, the chat id (``"123456789"``) for Telegram. The
``whatsapp:`` prefix of Twilio, iMessage's ``chatGuid`` and the like stay inside the adapter that needs them.
"""

import hmac
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from django.http import HttpRequest

from assistant.approval import codes as approval_codes
from assistant.approval.text import REPLY_LINE


class Channel:
    """The channels a person can link (``LinkedAddress.channel``); the first three are the spec's ``channel``."""

    SMS = "sms"
    WHATSAPP = "whatsapp"
    IMESSAGE = "imessage"
    TELEGRAM = "telegram"


PHONE_CHANNELS = (Channel.SMS, Channel.WHATSAPP, Channel.IMESSAGE)

# What a provider's status callback may say, in the order a message goes through them (failed and undelivered end
# it). Each adapter maps its provider's words onto these.
STATUSES = ("queued", "sent", "delivered", "read", "failed", "undelivered")


@dataclass(frozen=True)
class Sent:
    provider_message_id: str


@dataclass(frozen=True)
class Press:
    """An answer to an approval request (channels/approvals.py): a reply in words ("YES K7QZ4MX2": ``code``, the whole
    code) or a tap on a button (``code``: the request's handle, ``token``: the button's unguessable token,
    assistant/approval/codes.py). ``message``: the provider's id of the message the button was on, in the form the
    outbox recorded it (Telegram "<chat id>:<message id>", a WhatsApp wamid), or "" when the provider does not say;
    ``query``: Telegram's callback query id, which must be answered (else "")."""

    approve: bool
    code: str
    message: str = ""
    query: str = ""
    token: str = ""


@dataclass(frozen=True)
class Inbound:
    """One message the person sent. ``media``: one ``{"url": ..., "contentType": ...}`` per attachment (the URL is the
    provider's, or for providers that give an id instead, our note of it: ``{"id": ..., "contentType": ...}``); nothing
    is downloaded while the provider's request is open. ``received_at``: the provider's timestamp, when it gives one.
    ``extra``: what else the provider said that is worth keeping in the message's context (profile name, ...).
    ``press``: set when the person tapped an approval request's button (then ``text`` is empty)."""

    provider_message_id: str
    address: str
    text: str
    media: list[dict[str, str]]
    received_at: datetime | None
    extra: dict[str, str] = field(default_factory=dict)
    press: Press | None = None  # a button's answer to an approval request instead of words


@dataclass(frozen=True)
class StatusUpdate:
    provider_message_id: str
    status: str  # one of STATUSES
    error: str = ""


# After an unknown outcome, the next attempt waits at least this long: the provider must have finished with the late
# request before it can say whether it took it.
UNKNOWN_RETRY_SECONDS = 30.0


class SendError(Exception):
    """A send that did not happen (or may not have). ``retryable``: the same send may succeed later (the provider was
    down, slow or rate-limited us); otherwise it never will (unknown number, blocked, refused content).

    ``unknown``: the request went out and its answer did not come back (a timeout): the provider may have sent the
    text. The next attempt asks first (channels/adapters/unknown.py) and waits at least ``retry_after`` seconds."""

    def __init__(self, reason: str, *, retryable: bool, unknown: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.unknown = unknown
        self.retry_after: float | None = UNKNOWN_RETRY_SECONDS if unknown else None


class VerificationFailed(Exception):
    """The request does not prove it comes from the provider: a missing or wrong signature or secret. The view
    answers 403 and records nothing. The reason is for the log, never for the caller."""


class BadRequest(Exception):
    """A request that proved its origin but cannot be read (not the provider's shape). ``code`` is an ops.errors
    code."""

    def __init__(self, message: str, code: str = "invalid_body") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Adapter(Protocol):
    channel: str  # a Channel value
    max_text_length: int  # the provider's limit for one message's text, in characters

    def send_text(self, address: str, text: str, *, reference: str) -> Sent:
        """Send ``text`` (at most ``max_text_length``) to ``address``. ``reference``: our stable id of this send, used
        for the provider's idempotency where it offers any. Raises SendError."""
        ...

    def find_sent(self, address: str, text: str, *, since: datetime, as_template: bool) -> Sent | None:
        """Whether a send of ``text`` to ``address`` that began at ``since`` and timed out reached the provider after
        all: its id, or None when it did not or the provider offers no way to ask. Raises SendError (retryable,
        unknown) when the provider could not be asked."""
        ...

    def can_send_template(self) -> bool:
        """Whether the operator configured an approved template for this channel: what WhatsApp lets a business send
        outside its 24-hour window (channels/outbound/window.py). False for channels without such a window."""
        ...

    def send_template(self, address: str, text: str, *, reference: str) -> Sent:
        """Send the operator's approved template to ``address`` with ``text`` as its one variable (cut to
        TEMPLATE_VARIABLE_LIMIT by ``template_variable``). Raises SendError, not retryable where no template is
        configured."""
        ...

    def verify(self, request: HttpRequest) -> None:
        """Raise VerificationFailed unless the request carries the provider's valid signature or secret. Called
        before anything else reads the request (the view has checked only its size and content type)."""
        ...

    def parse_inbound(self, request: HttpRequest) -> list[Inbound]:
        """The person's messages in a verified request (none for a request that carries only statuses)."""
        ...

    def parse_statuses(self, request: HttpRequest) -> list[StatusUpdate]:
        """The delivery statuses in a verified request (none for a request that carries only messages)."""
        ...


# WhatsApp's limit for one parameter of a template's body. The operator's template wraps the text, for example "Your
# assistant has a message for you: {{1}}": Meta approves the wording, ours only fills the variable.
TEMPLATE_VARIABLE_LIMIT = 1024


def template_variable(text: str) -> str:
    """The text as a template's variable: whole when it fits, else cut with an ellipsis."""
    return text if len(text) <= TEMPLATE_VARIABLE_LIMIT else text[: TEMPLATE_VARIABLE_LIMIT - 1] + "…"


def no_template(channel: str) -> SendError:
    """What ``send_template`` raises on a channel that has no templates (or none configured)."""
    return SendError(f"No approved template is configured for {channel}.", retryable=False)


class NoLookup:
    """For a provider with no way to ask whether a timed-out send arrived: ``find_sent`` finds nothing, so the send
    goes again (the duplicate risk in docs/explanation/limits.md)."""

    def find_sent(self, address: str, text: str, *, since: datetime, as_template: bool) -> Sent | None:
        return None


class NoTemplates:
    """For a channel without a window that a template would open: text is all it sends."""

    channel: str

    def can_send_template(self) -> bool:
        return False

    def send_template(self, address: str, text: str, *, reference: str) -> Sent:
        raise no_template(self.channel)


def check_secret(given: str, expected: str, what: str) -> None:
    """Raise VerificationFailed unless the request's secret or signature ``given`` equals ``expected`` (compared in
    constant time); ``what`` names it in the reason, for the log."""
    if not given:
        raise VerificationFailed(f"no {what}")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise VerificationFailed(f"{what} does not match")


# --- Approval requests with buttons (Telegram, WhatsApp's Cloud API) ---------------------------------------------
# An approval request ends with its reply line ("Reply YES K7QZ4MX2 to approve or NO K7QZ4MX2 to deny.", maybe
# followed by a part's number): where the channel has buttons, the line gives way to Approve / Deny buttons that carry
# the request's handle and a token derived from its code (assistant/approval/codes.py), never the code itself.
# Whatever a button says, channels/approvals.py accepts it only from the address linked to the request's owner.
_BUTTON = re.compile(rf"^(approve|deny):([A-Z][2-9])\.({approval_codes.BUTTON_TOKEN.pattern})$")
_PART_NUMBER = re.compile(r" \(\d+/\d+\)$")


def approval_buttons(text: str) -> tuple[str, str] | None:
    """(the text without its reply line, the request's code) for an approval request; None for any other text."""
    body, _, last = text.rpartition("\n")
    number = _PART_NUMBER.search(last)
    found = REPLY_LINE.match(last[: number.start()] if number else last)
    if found is None or not body.strip():
        return None
    return body.rstrip() + (number.group(0) if number else ""), found.group("code")


def button_data(approve: bool, code: str) -> str:
    """What a button carries back (Telegram's callback_data, at most 64 bytes; a WhatsApp reply button's id): the
    request's handle and its token, 33 characters."""
    return f"{'approve' if approve else 'deny'}:{approval_codes.handle_of(code)}.{approval_codes.button_token(code)}"


def pressed(data: str, message: str = "", query: str = "") -> Press | None:
    """The Press a button's data stands for, or None for data no button of ours carries."""
    found = _BUTTON.match(data)
    if found is None:
        return None
    return Press(found.group(1) == "approve", found.group(2), message, query, token=found.group(3))
