from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from delivery.retention import prune_settled_deliveries


class Command(BaseCommand):
    help = (
        "Delete delivered and failed deliveries older than DELIVERY_RETENTION_DAYS (90 by default), in batches; "
        "their messages stay and keep the final status. Run it daily."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = prune_settled_deliveries()
        self.stdout.write(f"Deleted {deleted} finished deliveries older than {settings.DELIVERY_RETENTION_DAYS} days.")
