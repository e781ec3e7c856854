"""What became of a message on the person's phone, in one line: the thread's bubble, the message's page and the
admin read it from the message's outbox rows (one per part)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from channels.models import OutboundMessage, OutboundStatus

# How long after a send a provider's report is still awaited on the page.
REPORT_WINDOW = timedelta(days=1)

CHANNEL_NAMES = {"sms": "SMS", "whatsapp": "WhatsApp", "imessage": "iMessage", "telegram": "Telegram"}

# How far a part has come; the message is as far as its least advanced part. Ends without success rank last, so
# that a failed part is what the line says.
_PROGRESS = {
    "quiet hours": 0,
    "queued": 1,
    "retrying": 1,
    "processing": 2,
    "sent": 3,
    "delivered": 4,
    "read": 5,
    "held": -1,
    "undelivered": -2,
    "failed": -3,
}

_WORDS = {
    "quiet hours": "waits for your quiet hours to end",
    "queued": "waiting to be sent",
    "retrying": "not sent yet, trying again",
    "processing": "being sent",
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "held": "held",
    "undelivered": "not delivered",
    "failed": "not sent",
}


@dataclass(frozen=True)
class PhoneStatus:
    channel: str  # "SMS"
    address: str
    status: str  # a key of _WORDS: also the badge's class
    words: str  # "delivered"
    detail: str  # why it is held, the provider's error, ...
    when: datetime | None  # when a waiting part is due
    parts: int
    as_template: bool
    settled: (
        bool  # nothing more will be heard of it: the page stops asking (templates/conversations/_message_statuses.html)
    )


def status_of(row: OutboundMessage) -> str:
    if row.status == OutboundStatus.SENT:
        return row.provider_status if row.provider_status in _PROGRESS else "sent"
    if row.status == OutboundStatus.QUEUED:
        if row.waiting_for_quiet_hours:
            return "quiet hours"
        return "retrying" if row.attempts else "queued"
    return str(row.status)


def summarize(rows: Sequence[OutboundMessage]) -> PhoneStatus | None:
    if not rows:
        return None
    worst = min(rows, key=lambda row: (_PROGRESS[status_of(row)], row.part))
    status = status_of(worst)
    detail = worst.held_reason or worst.provider_error or (worst.last_error if status in ("failed", "retrying") else "")
    waiting = status in ("quiet hours", "retrying")
    return PhoneStatus(
        channel=CHANNEL_NAMES.get(worst.channel, worst.channel),
        address=worst.address,
        status=status.replace(" ", "-"),
        words=_WORDS[status],
        detail=detail,
        when=worst.next_attempt_at if waiting else None,
        parts=len(rows),
        as_template=any(row.as_template for row in rows),
        settled=_settled(status, worst),
    )


# Channels whose providers report what became of a text after they took it (Telegram does not).
_REPORTING = frozenset({"sms", "whatsapp", "imessage"})


def _settled(status: str, row: OutboundMessage) -> bool:
    """Whether more news may come: a provider's report after "sent" (for a day at most), or our own sending."""
    if status in ("delivered", "read", "failed", "undelivered", "held"):
        return True
    if status == "sent":
        return row.channel not in _REPORTING or row.sent_at is None or timezone.now() - row.sent_at > REPORT_WINDOW
    return False
