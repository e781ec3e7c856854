from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from channels.models import OutboundMessage, OutboundStatus
from ops.pruning import delete_in_batches


class Command(BaseCommand):
    help = "Delete texts sent or given up on, older than OUTBOX_RETENTION_DAYS (90 by default), in batches. Daily."

    def handle(self, *args: Any, **options: Any) -> None:
        cutoff = timezone.now() - timedelta(days=settings.OUTBOX_RETENTION_DAYS)
        # By id, oldest first (ids grow with created_at): the scan stops at the first batch's last row.
        finished = OutboundMessage.objects.filter(
            status__in=[OutboundStatus.SENT, OutboundStatus.FAILED], created_at__lt=cutoff
        )
        deleted = delete_in_batches(finished, oldest_first=("id",))
        self.stdout.write(f"Deleted {deleted} text(s) older than {settings.OUTBOX_RETENTION_DAYS} days.")
