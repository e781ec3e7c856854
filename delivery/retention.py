"""Finished deliveries are pruned after DELIVERY_RETENTION_DAYS (docs/reference/settings.md): the queue
keeps only what it may still need. The message stays (it is the person's history) and keeps its delivery's final
status (``Message.outcome``), written in the same transaction as each batch's DELETE, so the receipt and the console
still say what became of it. The delivery's tool calls (assistant.Action) go with it."""

from datetime import timedelta

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from conversations.models import Delivery, DeliveryStatus, Message
from ops.pruning import delete_in_batches

SETTLED = [DeliveryStatus.DELIVERED, DeliveryStatus.FAILED]


def prune_settled_deliveries() -> int:
    """Delete delivered and failed deliveries older than DELIVERY_RETENTION_DAYS, in batches; returns how many."""
    cutoff = timezone.now() - timedelta(days=settings.DELIVERY_RETENTION_DAYS)
    old = Delivery.objects.filter(status__in=SETTLED, created_at__lt=cutoff)  # the (status, created_at) index
    return delete_in_batches(old, oldest_first=("status", "created_at"), before_delete=_keep_outcomes)


def _keep_outcomes(delivery_ids: list[int]) -> None:
    status = Delivery.objects.filter(message_id=OuterRef("pk")).values("status")[:1]
    Message.objects.filter(delivery__id__in=delivery_ids).update(outcome=Subquery(status))
