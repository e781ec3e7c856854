"""The delivery lifecycle: queued → processing → delivered, or back to queued after a transient failure (with
exponential backoff), or failed. A failure never touches the message: it stays in the thread, retryable by staff."""

import logging
import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from assistant.backends import backend_named
from assistant.conversation import build_request
from assistant.outcomes import PermanentFailure, Reply, TransientFailure
from conversations.models import Delivery, DeliveryStatus, Message, Role, Source
from delivery.queue import lease_seconds

logger = logging.getLogger(__name__)

# A delivery "processing" with no lease (claimed by a release before leases) this long after its attempt started
# was abandoned. With a lease, its expiry says so (delivery/queue.py).
STALE_PROCESSING = timedelta(minutes=15)


class ReplyAlreadyRecorded(Exception):
    """A callback brought a reply for a message whose reply is already in the thread."""


def backoff_seconds(attempts: int) -> float:
    """The wait after the n-th failed attempt: BASE, 2 BASE, 4 BASE, ... capped at MAX, each shortened at random by
    up to ASSISTANT_RETRY_JITTER of itself. Deliveries that failed together (the assistant's runtime was down) then
    come back spread out rather than all at the same second, which could take the runtime down again."""
    delay = min(settings.ASSISTANT_RETRY_BASE_SECONDS * 2 ** max(attempts - 1, 0), settings.ASSISTANT_RETRY_MAX_SECONDS)
    shortened_by = settings.ASSISTANT_RETRY_JITTER * random.random()  # noqa: S311 (spreading retries, not a secret)
    return float(delay * (1 - shortened_by))


def attempt_delivery(delivery_id: int, deferrable: bool = False) -> str:
    """Claim a queued delivery, hand its message to the configured assistant backend and record what happened.
    After a transient failure the delivery is queued again with its ``next_attempt_at``; the caller enqueues the
    retry when its task backend can defer one (``deferrable``), else the log says who will pick it up."""
    now = timezone.now()
    claimed = Delivery.objects.filter(pk=delivery_id, status=DeliveryStatus.QUEUED).update(
        status=DeliveryStatus.PROCESSING,
        attempts=F("attempts") + 1,
        backend=settings.ASSISTANT_BACKEND,
        started_at=now,
        finished_at=None,
        next_attempt_at=None,
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        updated_at=now,
    )
    if not claimed:
        return "skipped"  # already taken by another attempt, delivered, or failed: nothing to do
    delivery = Delivery.objects.select_related("message__conversation", "message__api_key").get(pk=delivery_id)
    try:
        outcome = backend_named(delivery.backend)(build_request(delivery.message, delivery.attempts))
    except TransientFailure as failure:
        return _after_transient_failure(delivery, failure, deferrable)
    except PermanentFailure as failure:
        return _fail(delivery, str(failure))
    except Exception as error:
        logger.exception("delivery %s: unexpected error in the %s backend", delivery.pk, delivery.backend)
        return _after_transient_failure(
            delivery, TransientFailure(f"Unexpected error: {type(error).__name__}."), deferrable
        )
    _record_delivered(delivery.pk, outcome.text if isinstance(outcome, Reply) else None, attempt_finished=True)
    logger.info("delivery %s delivered on attempt %s (%s)", delivery.pk, delivery.attempts, delivery.backend)
    return DeliveryStatus.DELIVERED.value


def _after_transient_failure(delivery: Delivery, failure: TransientFailure, deferrable: bool) -> str:
    if delivery.attempts >= settings.ASSISTANT_MAX_ATTEMPTS:
        return _fail(delivery, f"{failure} Gave up after {delivery.attempts} attempts.")
    now = timezone.now()
    delay = max(backoff_seconds(delivery.attempts), min(failure.retry_after or 0, settings.ASSISTANT_RETRY_MAX_SECONDS))
    next_attempt_at = now + timedelta(seconds=delay)
    requeued = Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PROCESSING).update(
        status=DeliveryStatus.QUEUED,
        next_attempt_at=next_attempt_at,
        finished_at=now,
        last_error=str(failure),
        lease_expires_at=None,
        updated_at=now,
    )
    if requeued and not deferrable:
        logger.warning(
            "delivery %s: attempt %s failed (%s); the task backend cannot defer, so the retry due at %s waits "
            "for `manage.py retrydeliveries --due`",
            delivery.pk,
            delivery.attempts,
            failure,
            next_attempt_at.isoformat(),
        )
    else:
        logger.info(
            "delivery %s: attempt %s failed (%s); retry at %s",
            delivery.pk,
            delivery.attempts,
            failure,
            next_attempt_at.isoformat(),
        )
    return DeliveryStatus.QUEUED.value


def _fail(delivery: Delivery, error: str) -> str:
    now = timezone.now()
    Delivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PROCESSING).update(
        status=DeliveryStatus.FAILED,
        finished_at=now,
        next_attempt_at=None,
        last_error=error,
        lease_expires_at=None,
        updated_at=now,
    )
    logger.warning("delivery %s failed after %s attempt(s): %s", delivery.pk, delivery.attempts, error)
    return DeliveryStatus.FAILED.value


@transaction.atomic
def _record_delivered(
    delivery_id: int, reply_text: str | None, *, attempt_finished: bool, callback_id: str = ""
) -> Delivery:
    """Mark a delivery delivered and put the assistant's reply (if any, and if none is there yet) in the thread."""
    delivery = Delivery.objects.select_for_update(of=("self",)).select_related("message").get(pk=delivery_id)
    now = timezone.now()
    if reply_text is not None and delivery.reply_id is None:
        delivery.reply = Message.objects.create(
            conversation_id=delivery.message.conversation_id,
            role=Role.ASSISTANT,
            source=Source.ASSISTANT,
            text=reply_text,
        )
        delivery.callback_id = callback_id
    delivery.status = DeliveryStatus.DELIVERED
    delivery.next_attempt_at = None
    delivery.lease_expires_at = None
    if attempt_finished:
        delivery.finished_at = now
    delivery.save(
        update_fields=[
            "reply",
            "callback_id",
            "status",
            "next_attempt_at",
            "lease_expires_at",
            "finished_at",
            "updated_at",
        ]
    )
    return delivery


def record_callback_reply(message: Message, reply_text: str, callback_id: str) -> tuple[Delivery, bool]:
    """A reply the assistant runtime sent later. Returns the delivery and whether the reply is new; the same
    callback again (same webhook-id) changes nothing, another reply for the same message is refused."""
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update().get(message=message)
        if delivery.reply_id is not None:
            if delivery.callback_id == callback_id:
                return delivery, False
            raise ReplyAlreadyRecorded()
        # A reply proves the message arrived, whatever our side had concluded (a timeout, a scheduled retry).
        return _record_delivered(delivery.pk, reply_text, attempt_finished=False, callback_id=callback_id), True


def _abandoned(now: datetime) -> Q:
    """Being attempted by a worker that is gone: its lease expired (or, claimed before leases, long ago)."""
    return Q(status=DeliveryStatus.PROCESSING) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, started_at__lt=now - STALE_PROCESSING)
    )


def retryable(now: datetime) -> Q:
    return Q(status__in=[DeliveryStatus.FAILED, DeliveryStatus.QUEUED]) | _abandoned(now)


def due_deliveries(grace: timedelta) -> QuerySet[Delivery]:
    """Deliveries that should have been attempted by now: a retry whose time has come (the immediate backend
    cannot defer one), a task that never got enqueued, an attempt whose worker died."""
    cutoff = timezone.now() - grace
    return Delivery.objects.filter(
        Q(status=DeliveryStatus.QUEUED, next_attempt_at__lte=cutoff)
        | Q(status=DeliveryStatus.QUEUED, next_attempt_at__isnull=True, created_at__lte=cutoff)
        | _abandoned(timezone.now())
    )
