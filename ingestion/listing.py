"""What a key sent, a page at a time (GET /api/v1/inbound/messages), and a receipt that waits for its message to be
final (GET /api/v1/inbound/messages/{id}?wait=N). docs/reference/api.md#list-what-a-key-sent.

The list reads deliveries by (api_key, id) newest first: the index ``delivery_by_key_newest_first`` serves it, so a
page costs the same at a key's millionth message as at its tenth. The cursor is the last message's id: it names a
place in this key's list and nothing else.

A waiting receipt holds its gunicorn thread while it waits (WSGI has no other way to answer later), asleep between
cheap reads of one delivery row by primary key, backing off from 50 ms to 1 s. So that waiting never takes the
threads that accept messages, a process lets at most RECEIPT_WAIT_SLOTS requests wait at once, and gunicorn.conf.py
gives it that many threads more than WEB_THREADS. One more is refused before its key is even looked up (503
receipt_waits_busy, Retry-After), so that callers asking again cost next to nothing
(docs/reference/api.md#waiting-for-the-answer).
"""

import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, is_message_id
from ingestion.exceptions import InvalidParameter, ReceiptWaitsBusy
from ingestion.receipts import receipt
from keys.models import ApiKey

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_WAIT_SECONDS = 30
# What a key sends itself; an approval or a tool's follow-up carries the key of the message that led to it, but the
# person or the tool wrote it.
_SENT_BY_A_KEY = [Endpoint.CURRENT, Endpoint.LEGACY]
_FIRST_PAUSE, _LONGEST_PAUSE = 0.05, 1.0


def limit_of(query: Any) -> int:
    raw = query.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    # ASCII digits only: str.isdigit() also holds for "²", which int() refuses (a 500), and for other scripts' digits.
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidParameter(f"limit must be a whole number from 1 to {MAX_LIMIT}; it was {raw[:20]!r}.")
    return int(raw)


def wait_of(query: Any) -> float:
    raw = query.get("wait")
    if raw is None:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_WAIT_SECONDS:  # also NaN
        raise InvalidParameter(f"wait must be a number of seconds from 0 to {MAX_WAIT_SECONDS}; it was {raw[:20]!r}.")
    return seconds


def page(key: ApiKey, cursor: str | None, limit: int) -> dict[str, Any]:
    """The key's messages after ``cursor`` (newest first), each as its receipt, and the cursor of the next page."""
    deliveries = Delivery.objects.filter(api_key_id=key.pk, endpoint__in=_SENT_BY_A_KEY)
    if cursor is not None:
        deliveries = deliveries.filter(id__lt=_place_of(deliveries, cursor))
    with_reply = key.may_read_replies
    found = deliveries.select_related("message", *(["reply"] if with_reply else [])).order_by("-id")
    if with_reply:
        found = found.prefetch_related("actions")
    rows = list(found[: limit + 1])
    shown = rows[:limit]
    return {
        "success": True,
        "messages": [receipt(delivery.message, with_reply=with_reply) for delivery in shown],
        "next_cursor": shown[-1].message.public_id if len(rows) > limit else None,
    }


def _place_of(deliveries: QuerySet[Delivery], cursor: str) -> int:
    place = None
    if is_message_id(cursor):  # anything else matches nothing, and a NUL in a query is an error on PostgreSQL
        place = deliveries.filter(message__public_id=cursor).values_list("id", flat=True).first()
    if place is None:
        raise InvalidParameter("cursor is not one this list gave for this key; start again without it.")
    return place


def is_final(message: Message, *, with_reply: bool) -> bool:
    """Failed, or delivered (with the assistant's reply, for a key that reads replies). A message whose delivery was
    pruned (delivery/retention.py) is final: its outcome is kept on it, and no reply can come any more."""
    delivery = getattr(message, "delivery", None)  # the reverse one-to-one raises an AttributeError when absent
    if delivery is None:
        return True
    if delivery.status == DeliveryStatus.FAILED:
        return True
    return delivery.status == DeliveryStatus.DELIVERED and (not with_reply or delivery.reply_id is not None)


def refuse_when_busy(query: Any) -> None:
    """Before anything else is read (the key, the limit, the message): a request that asks to wait while every slot
    of this process is taken is refused at once, for next to nothing (ReceiptWaitsBusy, 503 with Retry-After). A
    hundred callers asking again and again must not cost what a hundred receipts read in full would."""
    try:
        seconds = wait_of(query)
    except InvalidParameter:
        return  # answered after the key is checked, like any other bad request
    if seconds > 0 and _slots.full():
        raise ReceiptWaitsBusy()


class _Slots:
    """How many requests of this process may wait at once (RECEIPT_WAIT_SLOTS, read when first needed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = 0

    def full(self) -> bool:
        return self._taken >= settings.RECEIPT_WAIT_SLOTS  # a glance without the lock: take() decides

    def take(self) -> bool:
        with self._lock:
            if self._taken >= settings.RECEIPT_WAIT_SLOTS:
                return False
            self._taken += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._taken -= 1


_slots = _Slots()


def when_final(load: Callable[[], Message], seconds: float, *, with_reply: bool) -> tuple[Message, bool]:
    """The message once final, or as it is after ``seconds``; and whether it could not wait (no slot was free)."""
    message = load()
    if seconds <= 0 or is_final(message, with_reply=with_reply):
        return message, False
    if not _slots.take():
        return message, True
    try:
        return _waited(message, load, time.monotonic() + seconds, with_reply=with_reply), False
    finally:
        _slots.give_back()


def _waited(message: Message, load: Callable[[], Message], deadline: float, *, with_reply: bool) -> Message:
    pause = _FIRST_PAUSE
    delivery = message.delivery  # present: a message without one is final (is_final) and never waits
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
        now = Delivery.objects.filter(pk=delivery.pk).values_list("status", "reply_id").first()
        if now is None:
            break  # deleted or pruned meanwhile: load() says so
        delivery.status, delivery.reply_id = now
        if is_final(message, with_reply=with_reply):
            break
    return load()
