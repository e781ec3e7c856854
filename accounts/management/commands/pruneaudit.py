from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from accounts.models import AuditEvent
from ops.pruning import delete_in_batches


class Command(BaseCommand):
    help = "Delete audit log lines older than AUDIT_RETENTION_DAYS (400 by default), in batches. Run it daily."

    def handle(self, *args: Any, **options: Any) -> None:
        cutoff = timezone.now() - timedelta(days=settings.AUDIT_RETENTION_DAYS)
        deleted = delete_in_batches(AuditEvent.objects.filter(at__lt=cutoff), oldest_first=("at",))
        self.stdout.write(f"Deleted {deleted} audit line(s) older than {settings.AUDIT_RETENTION_DAYS} days.")
