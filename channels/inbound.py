"""What the person sends on a channel, after its provider's signature was checked (channels/views.py).

From a linked address it lands in their thread exactly as if typed in the app: the same recording path
(ingestion.hotpath.recording.record_user_message: the message and its delivery together, the same per-thread order
and hand-off to the assistant), with the channel as its source and what the provider said (media links, the
provider's id) as its context.

The common case, a linked person writing, is one statement and no transaction once the process knows the address
(channels/senders.py), as api-message is once it knows the key: the message, its delivery and the provider's id
(under its unique constraint) are inserted and the address's last inbound time stamped together, on the condition
that the address is still linked to that person and their account active. A provider's retry fails on the unique
index (a twin racing the first waits there for the first to commit), as a whole: it is one statement, so nothing of
it is left (inside a caller's transaction, a savepoint is rolled back), and it is answered as a duplicate. Every
other case (an unknown sender, a deactivated account, nothing to say, Telegram's ``/start``, an
address unlinked since it was remembered) goes the slow way: in a transaction, the provider's id first, then what it
asks for.

An unknown sender gets no thread: at most one short answer per address per day saying how to link (LinkHint), sent
after the commit. Telegram's ``/start <token>`` (the console's one-time deep link) links the chat. An answer to an
approval request (a button's tap, or a reply such as "YES K7QZ4MX2") is decided by channels/approvals.py and is never a
message of the thread."""

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.urls import reverse
from django.utils import timezone

from channels import approvals, linking, senders
from channels.adapters.base import Channel, Inbound, Press
from channels.adapters.payloads import storable
from channels.models import InboundEvent, LinkedAddress, LinkHint
from channels.notify import deliver_notice
from channels.outbound.queue import held_released, release_held
from conversations.models import Endpoint, Message, Source
from ingestion.hotpath.recent import NoLongerHolds
from ingestion.hotpath.recording import record_user_message

logger = logging.getLogger(__name__)

HINT_INTERVAL = timedelta(days=1)


@dataclass
class Received:
    """What became of one inbound message (for the log and the tests)."""

    # recorded, duplicate, unknown_sender, linked, link_refused, ignored, or "answer: <outcome>" (channels/approvals.py)
    outcome: str
    message_id: str = ""
    notices: list[tuple[str, str, str]] = field(default_factory=list)  # (channel, address, text) sent after commit


def receive(channel: str, inbound: Inbound, request_id: str = "") -> Received:
    """Record one inbound message (see the module); notices to the sender go out after the commit."""
    try:
        press = inbound.press or approvals.as_answer(inbound.text)
        received = None if press is not None else _from_known_sender(channel, inbound, request_id)
        if received is None:
            with transaction.atomic():
                received = _route(channel, inbound, request_id) if press is None else _answer(channel, inbound, press)
                for notice in received.notices:
                    transaction.on_commit(partial(deliver_notice.enqueue, *notice), robust=True)
    except IntegrityError:
        # The provider's id is taken: a retry (or its twin racing it, which waited on the unique index for the
        # first to commit). Everything this one wrote is rolled back with it.
        if not _seen(channel, inbound):
            raise
        received = Received("duplicate")
    logger.info("channel message %s: %s", channel, received.outcome)
    return received


def _seen(channel: str, inbound: Inbound) -> bool:
    return InboundEvent.objects.filter(channel=channel, provider_message_id=inbound.provider_message_id).exists()


def _from_known_sender(channel: str, inbound: Inbound, request_id: str) -> Received | None:
    """A linked, active person's message in one statement (the module), or None for the slow way: the sender is not
    linked or not active, the message is a ``/start`` or empty, or what was remembered no longer holds."""
    if (channel == Channel.TELEGRAM and inbound.text.startswith("/start")) or not (
        inbound.text.strip() or inbound.media
    ):
        return None
    sender = senders.recall(channel, inbound.address)
    if sender is None:
        sender = senders.look_up(channel, inbound.address)
        if sender is None or not sender.user.is_active or sender.conversation_id is None:
            return None
        senders.remember(channel, inbound.address, sender)
    try:
        message = _record_one_statement(channel, inbound, request_id, sender)
    except NoLongerHolds:
        # The address unlinked, the account deactivated or the thread replaced since the sender was remembered: look
        # again, the slow way.
        senders.forget(channel, inbound.address)
        return None
    return Received("recorded", message.public_id)


def _record_one_statement(channel: str, inbound: Inbound, request_id: str, sender: senders.Sender) -> Message:
    now = timezone.now()
    event = partial(
        InboundEvent,
        channel=channel,
        provider_message_id=inbound.provider_message_id,
        address=inbound.address,
        received_at=now,
    )
    updates = [senders.heard_from(sender, now)]
    if channel == Channel.WHATSAPP:  # its window is open again: what was held for it goes out now
        updates.append(held_released(sender.user.pk, channel, inbound.address, now))
    # A retry fails on the unique index as a whole; inside a caller's transaction only its savepoint is lost.
    connection = connections[DEFAULT_DB_ALIAS]
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        return _recorded(
            sender,
            channel,
            inbound,
            request_id,
            only_if=senders.still_linked(sender, channel, inbound.address),
            along=lambda message: [event(message=message)],
            updates=updates,
        )


def _recorded(sender: senders.Sender, channel: str, inbound: Inbound, request_id: str, **more: Any) -> Message:
    """The person's message in their thread, as it came on the channel (``more``: record_user_message's options)."""
    return record_user_message(
        user=sender.user,
        endpoint=Endpoint.CHANNEL,
        source=Source(channel),
        text=storable(inbound.text),
        context=storable(_context(channel, inbound)),
        request_id=request_id,
        **more,
    )


def _note_event(channel: str, inbound: Inbound, message: Message | None = None) -> None:
    """The provider's id, once: IntegrityError when it is already there (caught by ``receive``)."""
    InboundEvent.objects.create(
        channel=channel, provider_message_id=inbound.provider_message_id, address=inbound.address, message=message
    )


def _route(channel: str, inbound: Inbound, request_id: str) -> Received:
    """The slow way, in a transaction: the provider's id first, then what the message asks for. A linked, active
    person's message comes here only when what was remembered of them changed a moment ago."""
    if channel == Channel.TELEGRAM and inbound.text.startswith("/start"):
        _note_event(channel, inbound)
        return _telegram_start(inbound)
    sender = senders.look_up(channel, inbound.address)
    if sender is None:
        _note_event(channel, inbound)
        return _unknown_sender(channel, inbound.address)
    if not sender.user.is_active or (not inbound.text.strip() and not inbound.media):
        # Staff deactivated the account (its channels fall silent, like its keys), or nothing to say.
        _note_event(channel, inbound)
        return Received("ignored")
    message = _recorded(sender, channel, inbound, request_id)
    _note_event(channel, inbound, message)
    LinkedAddress.objects.filter(pk=sender.address_id).update(last_inbound_at=timezone.now())
    if channel == Channel.WHATSAPP:  # its window is open again: what was held for it goes out now
        release_held(sender.user.pk, channel, inbound.address)
    return Received("recorded", message.public_id)


def _answer(channel: str, inbound: Inbound, press: Press) -> Received:
    """An answer to an approval request (a button's tap or "YES K7QZ4MX2"): decided for the person linked to the
    address, never a message of the thread (channels/approvals.py). From an address nobody linked, nothing runs."""
    _note_event(channel, inbound)
    person = approvals.linked_person(channel, inbound.address)
    if person is None:
        if press.query:
            transaction.on_commit(partial(approvals.unlinked_tap, press), robust=True)
            return Received("unknown_sender")
        return _unknown_sender(channel, inbound.address)
    LinkedAddress.objects.filter(channel=channel, address=inbound.address).update(last_inbound_at=timezone.now())
    if channel == Channel.WHATSAPP:  # its window is open again: what was held for it goes out now
        release_held(person.pk, channel, inbound.address)
    answered = approvals.answer(channel, inbound.address, person, press)
    return Received(f"answer: {answered.outcome}")


def _context(channel: str, inbound: Inbound) -> dict[str, Any]:
    """What the assistant gets beside the text, as for a JSON body sent to the API."""
    context: dict[str, Any] = {
        "message": inbound.text,
        "channel": channel,
        "from": inbound.address,
        "providerMessageId": inbound.provider_message_id,
    }
    if inbound.media:
        context["media"] = inbound.media
    if inbound.received_at is not None:
        context["sentAt"] = inbound.received_at.isoformat()
    context.update(inbound.extra)
    return context


def _unknown_sender(channel: str, address: str) -> Received:
    if not _may_hint(channel, address):
        return Received("unknown_sender")
    where = settings.PUBLIC_BASE_URL + reverse("channels:settings")
    text = f"This {_name(channel)} is not linked to an assistant. To link it, sign in at {where}"
    return Received("unknown_sender", notices=[(channel, address, text)])


def _may_hint(channel: str, address: str) -> bool:
    """Claim this address's one "how to link" answer of the day: a conditional update, or the first row."""
    now = timezone.now()
    claimed = LinkHint.objects.filter(channel=channel, address=address, sent_at__lte=now - HINT_INTERVAL).update(
        sent_at=now
    )
    if claimed:
        return True
    try:
        with transaction.atomic():
            LinkHint.objects.create(channel=channel, address=address, sent_at=now)
    except IntegrityError:
        return False  # told within the day
    return True


def _name(channel: str) -> str:
    return "Telegram account" if channel == Channel.TELEGRAM else "number"


def _telegram_start(inbound: Inbound) -> Received:
    """``/start <token>`` from the console's deep link; a bare ``/start`` is someone who found the bot."""
    parts = inbound.text.split()
    if len(parts) < 2:
        if LinkedAddress.objects.filter(channel=Channel.TELEGRAM, address=inbound.address).exists():
            return Received("ignored")
        return _unknown_sender(Channel.TELEGRAM, inbound.address)
    result = linking.link_telegram(parts[1], inbound.address)
    return Received(result.outcome, notices=[(Channel.TELEGRAM, inbound.address, result.text)])


# Providers retry for hours (Twilio, Meta and Telegram give up within a day or two): a provider id older than this
# cannot come back, and "how to link" answers older than a day no longer hold anything back.
EVENT_RETENTION = timedelta(days=30)


def prune(now: datetime | None = None) -> tuple[int, int]:
    """Delete provider ids older than EVENT_RETENTION and stale "how to link" marks: (ids, marks) deleted."""
    now = now or timezone.now()
    events, _ = InboundEvent.objects.filter(received_at__lt=now - EVENT_RETENTION).delete()
    hints, _ = LinkHint.objects.filter(sent_at__lt=now - HINT_INTERVAL).delete()
    return events, hints
